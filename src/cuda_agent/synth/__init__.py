"""Data synthesis: an operator catalogue, composers that stack operators into new problems,
execution filters, decontamination against a benchmark, and dataset export."""
