"""Benchmarking: run solutions or an agent over a problem set, compute the paper's metrics, and
report them (table, JSON, self-contained HTML)."""
