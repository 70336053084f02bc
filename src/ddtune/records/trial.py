"""One `TrialRecord` per (configuration, repeat): what the store keeps and the report reads.

The sweep store builds these (`ddtune.sweep.store.records.trial_records`); the
report never touches SQLite or HTTP. Metric keys are `METRIC_NAMES`
(`metrics.py`), shared with the bench aggregates. A record
carries its configuration as objects (`params: DecodeParams` + user `vars`);
`to_dict`/`from_dict` render `params` with `to_wire`/`from_wire`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

from ddtune.params import DecodeParams


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
    # per request {"offsets", "gaps", "agree"} (ddtune.bench.logit_gaps), None when not recorded
    logprob_gaps: list[dict[str, Any] | None] | None = None
    temperature: float = 0.0
    conditions: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)  # [bench.load]: levels, requests, max_rate
    # per workload (suite or "traffic"): {WORKLOAD_METRICS name: value}
    workloads: dict[str, dict[str, float | None]] = field(default_factory=dict)
    # `[bench] token_paths` / `forward_probes` (a predicting race's baseline): what one run
    # measured for a forecast (bench/forecast_inputs.py)
    token_paths: list[dict[str, Any]] | None = None
    forward_probes: list[dict[str, Any]] | None = None
    # a counting engine's {"drafts", "accepted_per_position"}: a chain's run predicts smaller K
    draft_counts: dict[str, Any] | None = None
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


def _finite(value: Any) -> TypeGuard[float]:
    """A real number (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
