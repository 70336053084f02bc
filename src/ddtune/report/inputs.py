"""What the report reads: one `TrialRecord` per (configuration, repeat).

The sweep store builds these (`ddtune.sweep.store.db.Store.trial_records`); the
report never touches SQLite or HTTP. Metric names are shared with the bench
aggregates (`ddtune.bench`): see docs/architecture.md "Metric names". A record
carries its configuration as objects (`params: DecodeParams` + user `vars`);
`to_dict`/`from_dict` render `params` with `to_wire`/`from_wire`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

from ddtune.params import DecodeParams
from ddtune.stats.blocked import Verdict

METRIC_NAMES = (
    "short_tps",  # mean decode tokens/s over the short-context requests
    "long_tps",  # same at long context
    "short_ttft_s",  # mean time to first token, short context
    "long_ttft_s",
    "acceptance_length",  # tokens committed per verify round incl. bonus, this run only
    "coding_passed",  # tasks (samples) whose tests passed
    "coding_total",  # tasks (samples) run
)


@dataclass
class TrialRecord:
    trial_id: int
    label: str  # the config's label, e.g. "ddtree b16 k4 wnone" (+ " name=value" per user var)
    params: DecodeParams
    is_baseline: bool
    repeat: int
    status: str  # "done" | "failed" | "interrupted" | "pending"
    vars: dict[str, Any] = field(default_factory=dict)  # user variables of the config
    attempts: int = 0
    failure: str | None = None  # class of the last failed attempt, e.g. "crashed(1)"
    failure_detail: str | None = None
    log_tail_path: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)  # keys from METRIC_NAMES
    acceptance_lengths: list[float] = field(default_factory=list)  # per request
    outputs: list[str] = field(default_factory=list)  # T=0 output texts in request order
    # per request {"offsets", "gaps", "agree"} (ddtune.bench.gaps), None when not recorded
    logprob_gaps: list[dict[str, Any] | None] | None = None
    temperature: float = 0.0
    conditions: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)  # [bench.load]: levels, requests, max_rate
    # conditions keys: "hardware" (dict), "hardware_fingerprint" (str),
    # "prompt_set_hash" (str), "server_identity" (dict)

    @property
    def config(self) -> dict[str, Any]:
        """The configuration in wire form: `params.to_wire()` plus the user variables."""
        return {**self.params.to_wire(), **self.vars}

    @property
    def coding(self) -> tuple[int, int] | None:
        """(tasks passed, tasks run) of a done trial's coding bench; None when it ran none."""
        passed, total = self.metrics.get("coding_passed"), self.metrics.get("coding_total")
        if self.status != "done" or not _finite(passed) or not _finite(total) or not total:
            return None
        return int(passed), int(total)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; `params` in wire form. `from_dict` reads it back."""
        return {**asdict(self), "params": self.params.to_wire()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        return cls(**{**data, "params": DecodeParams.from_wire(data["params"], "params")})


@dataclass(frozen=True)
class Elimination:
    """When and why a config left a race (`ddtune.sweep.plan.race` decides, the report tells)."""

    label: str
    at_pass: int
    reason: str  # "worse" | "pass_rate" | "failed"
    detail: str
    p_value: float | None = None  # Holm-adjusted


@dataclass
class SweepContext:
    """How the sweep was run, for the report's words (strategy, race history)."""

    strategy: str = "grid"  # "grid" | "race" | "optuna"
    objective: str = "throughput"
    passes: int = 0  # finished passes (blocks)
    stop: str | None = None  # why a race stopped
    exits: list[Elimination] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. what an Optuna search explored
    efforts: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> starts, benches
    verdict: Verdict | None = None  # a restart-bound race's own answer (its mixed model)
    store: str | None = None  # the sweep's store, for the command that applies the answer

    def exit_of(self, label: str) -> Elimination | None:
        return next((e for e in self.exits if e.label == label), None)


def _finite(value: Any) -> TypeGuard[float]:
    """A real number (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
