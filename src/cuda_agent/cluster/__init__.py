"""Evaluation pools: many evaluations at once, builds on CPU workers, one job per GPU."""
