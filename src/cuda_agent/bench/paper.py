"""The paper's Table 1 (CUDA Agent, arXiv 2602.24286), for side-by-side comparison.

Numbers as printed in the paper (percent and x converted to fractions and ratios). Each entry
has the same shape as ``metrics.compute_metrics`` (fields the paper does not give are None).
"""

from __future__ import annotations

from typing import Any

# model -> subset -> (pass, faster vs eager, faster vs compile, speed-up vs eager, vs compile)
TABLE_1: dict[str, dict[str, tuple[float, float, float, float, float]]] = {
    "CUDA Agent": {
        "overall": (98.8, 98.4, 96.8, 2.60, 2.11),
        "1": (100.0, 99.0, 97.0, 2.48, 1.87),
        "2": (100.0, 100.0, 100.0, 3.27, 2.80),
        "3": (94.0, 94.0, 90.0, 1.80, 1.52),
    },
    "Claude Opus 4.5": {
        "overall": (95.2, 90.4, 66.4, 1.99, 1.46),
        "1": (96.0, 88.0, 72.0, 2.03, 1.54),
        "2": (98.0, 97.0, 69.0, 2.24, 1.60),
        "3": (88.0, 82.0, 50.0, 1.52, 1.10),
    },
    "Gemini 3 Pro": {
        "overall": (91.2, 87.6, 69.6, 1.92, 1.42),
        "1": (95.0, 90.0, 72.0, 1.99, 1.51),
        "2": (93.0, 91.0, 76.0, 2.03, 1.46),
        "3": (80.0, 76.0, 52.0, 1.58, 1.17),
    },
    "Seed1.6 (base)": {
        "overall": (74.0, 43.6, 27.2, 0.95, 0.69),
        "1": (90.0, 63.0, 51.0, 1.65, 1.25),
        "2": (74.0, 40.0, 16.0, 0.68, 0.50),
        "3": (42.0, 12.0, 2.0, 0.60, 0.40),
    },
}
LEVEL_SIZES = {"1": 100, "2": 100, "3": 50}


def paper_metrics(model: str) -> dict[str, Any]:
    """One model's row of Table 1 in the shape of ``compute_metrics``'s output."""
    rows = TABLE_1[model]

    def entry(subset: str) -> dict[str, Any]:
        p, fe, fc, se, sc = rows[subset]
        n = sum(LEVEL_SIZES.values()) if subset == "overall" else LEVEL_SIZES[subset]
        return {
            "n": n,
            "pass_rate": p / 100,
            "faster_rate_eager": fe / 100,
            "faster_rate_compile": fc / 100,
            "geomean_speedup_eager": se,
            "geomean_speedup_compile": sc,
            "fast_p": {},
            "mean_reward": None,
        }

    return {"overall": entry("overall"), "levels": {level: entry(level) for level in LEVEL_SIZES}}
