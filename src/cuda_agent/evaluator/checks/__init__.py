"""The checks a verdict passes through, each asked of a worker of its own mode and read back.

The problem's runtime check and its task lint (``problem_runtime.py``, ``task_lint.py``), the
memory-safety run of a correct candidate with its report parsers and verdict cache
(``memory_safety.py``, ``memory_reports.py``, ``memory_check_cache.py``), the torch.compile
baseline's ratio (``compile_ratio.py``), the ``--shapes`` re-verification (``shapes.py``) and
the Nsight Compute metrics for agents (``ncu_metrics.py``). What it does not do: order the
stages or compute the reward (``pipeline.py``, ``reward.py``), or start processes itself
(``launch/``). No re-exports: import each name from the module that defines it.
"""
