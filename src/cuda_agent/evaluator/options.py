"""Options of one evaluation, with the paper's defaults, validated once at the edge."""

from __future__ import annotations

from dataclasses import dataclass, field

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.types import BACKENDS, BASELINES
from cuda_agent.evaluator.worker.names import POLICIES, PRECISIONS
from cuda_agent.evaluator.worker.protocol import TimingOptions

REWARDS = ("milestone", "continuous")


@dataclass
class EvalOptions:
    backend: str = "cpu"
    baselines: tuple[str, ...] = ("eager", "compile")
    seed: int | None = None
    trials: int = 5
    atol: float | None = None
    rtol: float | None = None
    policy: str = "strict"
    reward: str = "milestone"
    margin: float = 0.05
    cpu_threads: int = 1
    build_timeout_s: float = 600.0
    worker_timeout_s: float = 600.0
    baseline_timeout_s: float = 900.0
    use_baseline_cache: bool = True
    precision: str = "ieee"
    profile: bool = False
    keep_spare_worker: bool = False
    spare_depth: int = 1  # started spare workers kept per device (with keep_spare_worker)
    sandbox: bool = True  # run the candidate's process under the strongest isolation here
    allow_unsandboxed: bool = False  # where no isolation is available, run anyway (isolation: none)
    shapes: bool = False  # verify a correct candidate again at other sizes (evaluator/shapes.py)
    reward_shapes: bool = False  # a failed shape makes the reward -1 (implies shapes)
    timing: TimingOptions = field(default_factory=TimingOptions)

    def validate(self) -> EvalOptions:
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"unknown backend {self.backend!r} (choose from {', '.join(BACKENDS)})"
            )
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
        if self.policy not in POLICIES:
            raise ConfigError(f"unknown policy {self.policy!r} (choose from {', '.join(POLICIES)})")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision policy {self.precision!r} (choose from {', '.join(PRECISIONS)})"
            )
        if self.reward not in REWARDS:
            raise ConfigError(f"unknown reward {self.reward!r} (choose from {', '.join(REWARDS)})")
        if not 1 <= self.spare_depth <= 16:
            raise ConfigError("spare workers per device must be between 1 and 16")
        if not 1 <= self.trials <= 100:
            raise ConfigError("trials must be between 1 and 100")
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ConfigError(f"{name} must be >= 0")
        self.timing.enabled = "eager" in self.baselines
        self.shapes = self.shapes or self.reward_shapes
        return self
