"""Options of one evaluation, with the paper's defaults, validated once at the edge.

``EvalOptions`` is the worker's ``EvalSettings`` (what the parent and the worker share, carried
into every request) plus what only the parent uses: baselines, seed, reward, deadlines, caches,
spare workers, isolation, the shapes check and the device budget (``device_budget.py``). The
command line builds one and validates it before it loads anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.types import BASELINES
from cuda_agent.evaluator.device_budget import BudgetRule
from cuda_agent.evaluator.worker.protocol import EvalSettings
from cuda_agent.solutions.language import REQUIRABLE

REWARDS = ("milestone", "continuous")
# how the CLI spells the time limits (its errors name the option a user typed)
TIMEOUT_NAMES = {"worker_timeout_s": "--timeout", "baseline_timeout_s": "the baseline timeout"}


@dataclass
class EvalOptions(EvalSettings):
    baselines: tuple[str, ...] = ("eager", "compile")
    seed: int | None = None
    reward: str = "milestone"
    margin: float = 0.05
    worker_timeout_s: float = 600.0
    baseline_timeout_s: float = 900.0
    use_baseline_cache: bool = True
    keep_spare_worker: bool = False
    spare_depth: int = 1  # started spare workers kept per device (with keep_spare_worker)
    sandbox: bool = True  # run the candidate's process under the strongest isolation here
    allow_unsandboxed: bool = False  # where no isolation is available, run anyway (isolation: none)
    # verify a correct candidate again at other sizes (evaluator/checks/shapes.py)
    shapes: bool = False
    reward_shapes: bool = False  # a failed shape makes the reward -1 (implies shapes)
    language: str | None = None  # require the solution's kernel language: cuda or triton
    # how long a candidate may keep its device once verification starts: auto (from the
    # reference's call time), off, SECONDS or xFACTOR (evaluator/device_budget.py)
    device_budget: str = "auto"
    memory_check: bool = True  # a correct candidate runs once more under a memory checker
    memory_check_timeout_s: float = 240.0
    use_memory_check_cache: bool = True  # a repeated solution reuses its check's answer

    def validate(self) -> EvalOptions:
        """The checked options: a new value with what follows from the others set (timing only
        with the eager baseline; ``reward_shapes`` implies ``shapes``). Writes nothing into
        ``self`` or the objects it shares with its copies. Raises ``ConfigError`` (one line:
        which value, what it must be) on an unusable one."""
        self.validate_settings()
        unknown = [b for b in self.baselines if b not in BASELINES]
        if unknown:
            raise ConfigError(
                f"unknown baseline(s) {', '.join(unknown)} (choose from eager, compile)"
            )
        if "compile" in self.baselines and "eager" not in self.baselines:
            raise ConfigError(
                "the compile baseline needs the eager baseline "
                "(speed-ups are chained through eager)"
            )
        if self.reward not in REWARDS:
            raise ConfigError(f"unknown reward {self.reward!r} (choose from {', '.join(REWARDS)})")
        if self.language is not None and self.language not in REQUIRABLE:
            raise ConfigError(
                f"unknown language {self.language!r} (choose from {', '.join(REQUIRABLE)})"
            )
        for name in ("worker_timeout_s", "baseline_timeout_s"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ConfigError(f"{TIMEOUT_NAMES[name]} must be a number of seconds > 0")
        if not self.memory_check_timeout_s > 0:
            raise ConfigError("the memory check's time limit must be > 0 seconds")
        if not 1 <= self.spare_depth <= 16:
            raise ConfigError("spare workers per device must be between 1 and 16")
        BudgetRule.parse(self.device_budget)
        return replace(
            self,
            timing=replace(self.timing, enabled="eager" in self.baselines),
            shapes=self.shapes or self.reward_shapes,
        )
