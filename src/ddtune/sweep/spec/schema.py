"""The tables of a sweep spec as strict pydantic models (`ddtune.tables.StrictModel`).

    [sweep]      SweepTable: name, description, repeats, order, seed, baseline,
                 strategy (grid|race|optuna|predict), min_repeats, tolerance, max_trials,
                 max_hours, passes_per_start, objective, interleave (trial|request),
                 restart_bound (auto|true|false), trace (a trace folder)
    [space]      SpaceTable: lists (or single values) of mode/budget/topk/window and the
                 knobs depth_bonus/rank_probe, or `method` (`ddtune.methods`) with one
                 `[space.<method>]` table of axes per method, `{low, high, log, step}` integer ranges
                 (strategy "optuna" only), [space.vars] lists of user variables
    [optuna]     OptunaTable: n_trials, confirm_top, seed
    [[configs]]  ConfigTable: mode/budget/topk/window/knobs + vars (also `sweep.baseline`),
                 or `method` and that method's knobs
    [service]    a plain table here: `ddtune.services.ServiceSpec` parses it
    [bench]      `ddtune.bench.BenchMatrix`
    [retry]      RetryPolicy: attempts, backoff
    [cluster]    `cluster.ClusterTable`: backend (local | ray), slots, placement
    [report]     `ddtune.report.ReportOptions` (read by `sweep report` from the stored spec)

These models check the shape (unknown keys, types, ranges, variable names);
the decoding parameters themselves are checked by `DecodeParams.from_wire`
when `parse.py` builds the configurations, so both kinds of error carry the
full key path in `UserError.key`. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from ddtune.bench.matrix import BenchMatrix
from ddtune.methods import ALIASES, LEGACY, METHOD_NAMES
from ddtune.params import DECODE_KEYS, KNOB_KEYS, PARAM_KEYS
from ddtune.report.options import Interleave, ReportOptions
from ddtune.sweep.spec.cluster import ClusterTable
from ddtune.tables import StrictModel, name_rule

ORDERS = ("interleaved", "random", "sequential")
Order = Literal["interleaved", "random", "sequential"]
RestartBoundSetting = bool | Literal["auto"]  # true / false pin it; "auto": from the costs
OBJECTIVES = ("throughput", "long_context", "short_context", "speedup", "mix")
# mix: tok/s over the bench's workloads weighted by [bench] mix (bench suites, traffic)
Objective = Literal["throughput", "long_context", "short_context", "speedup", "mix"]
RESERVED_VARS = (*DECODE_KEYS, "port", "method", "method_args")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _scalar(value: Any) -> Any:
    if isinstance(value, str | int | float | bool):
        return value
    raise ValueError("must be a string, number or boolean")


def _var_names(table: dict[str, Any]) -> dict[str, Any]:
    for name in table:
        if not _VAR_RE.match(name) or name in RESERVED_VARS:
            reserved = "/".join(RESERVED_VARS)
            raise ValueError(f"variable name {name!r} must be an identifier other than {reserved}")
    return table


def _axis(value: Any) -> tuple[Any, ...]:
    """A grid axis: a list of values, or one value written on its own."""
    values = tuple(value) if isinstance(value, list) else (value,)
    if not values:
        raise ValueError("is an empty list; give at least one value or remove the key")
    return values


def _restart_bound(value: Any) -> Any:
    if isinstance(value, bool) or value == "auto":
        return value
    raise ValueError('must be true, false or "auto" (chosen from the start and bench costs)')


VarValue = Annotated[Any, AfterValidator(_scalar)]
Axis = Annotated[tuple[Any, ...], BeforeValidator(_axis)]


class IntRange(StrictModel):
    """`{low = 2, high = 256, log = true}`: the integers low..high (for strategy "optuna")."""

    low: int  # the smallest integer tried
    high: int  # the largest integer tried
    log: bool = False  # sample on a log scale
    step: Annotated[int, Field(ge=1)] = 1  # distance between the integers tried

    def count(self) -> int:
        return max(0, (self.high - self.low) // self.step + 1)


def _shape(value: Any) -> str:
    """Union tag: a table is a range, anything else an axis (so errors name the key)."""
    return "dict" if isinstance(value, Mapping | IntRange) else "list"


Dimension = Annotated[
    Annotated[Axis, Tag("list")] | Annotated[IntRange, Tag("dict")], Discriminator(_shape)
]
MethodAxes = dict[str, Axis]


def _method_knobs(data: Any, fields: tuple[str, ...]) -> Any:
    """With `method` written, the keys that are not fields (for EAGLE-like methods: every
    key but `method`/`mode`/`vars`) are that method's knobs, collected as `method_knobs`."""
    if not isinstance(data, Mapping) or "method" not in data:
        return data
    name = ALIASES.get(data["method"], data["method"])
    own = fields if name in LEGACY else ("method", "mode", "vars")
    knobs = {k: v for k, v in data.items() if k not in own}
    return {**{k: v for k, v in data.items() if k in own}, "method_knobs": knobs}


class ConfigTable(StrictModel):
    """One `[[configs]]` table or `sweep.baseline`: parameters in wire form, plus vars.

    `method = "eagle3"` with its knobs beside it (`num_steps = 3`, ...) names a method of
    `ddtune.methods`; `DecodeParams.from_wire` checks them."""

    mode: Any = None  # decoding mode: "ar", "dflash" (chain) or "ddtree"
    method: Any = None  # a method of ddtune.methods (e.g. "eagle3"), its knobs beside it
    method_knobs: dict[str, Any] = Field(default={}, exclude=True)  # from the keys beside method
    budget: Any = None  # tree node budget (nodes besides the root)
    topk: Any = None  # per-depth branching cap of the tree
    window: Any = None  # draft window in tokens, or "none" (the whole context)
    # DDTree knob: a bonus for deeper nodes (SGLang: SGLANG_DDTREE_DEPTH_BONUS)
    depth_bonus: Any = None
    # DDTree knob: probe the target token's rank (SGLang: SGLANG_DDTREE_RANK_PROBE)
    rank_probe: Any = None
    # user variables of this config, substituted into service.command
    vars: Annotated[dict[str, VarValue], AfterValidator(_var_names)] = {}

    @model_validator(mode="before")
    @classmethod
    def _collect_knobs(cls, data: Any) -> Any:
        return _method_knobs(data, (*DECODE_KEYS, "method", "vars"))

    def params_wire(self) -> dict[str, Any]:
        """The decoding parameters the user wrote (the rest keep their defaults)."""
        keys = (*DECODE_KEYS, "method", "method_knobs")
        return {key: getattr(self, key) for key in keys if key in self.model_fields_set}


class SpaceTable(StrictModel):
    """`[space]`: the grid is the cartesian product of every axis written.

    With `method = [...]`, each method's grid is its own: `[space.<method>]` holds its
    axes (knobs of `ddtune.methods`; for dflash/ddtree also budget/topk/window and the
    DDTree knobs, which otherwise come from `[space]` itself)."""

    mode: Axis = ()  # modes to try: "ar", "dflash", "ddtree"
    method: Axis = ()  # methods to try (ddtune.methods), each with its [space.<method>] axes
    # [space.<method>]: one table of axes per method (`ddtune.methods.METHOD_NAMES`; a test
    # keeps these fields and that list the same)
    ar: MethodAxes = {}  # plain decoding: no knobs
    dflash: MethodAxes = {}  # DFlash: block_size, drafter (+ window)
    ddtree: MethodAxes = {}  # DDTree: drafter (+ budget, topk, window, DDTree knobs)
    eagle: MethodAxes = {}  # EAGLE: num_steps, topk, num_draft_tokens, drafter
    eagle3: MethodAxes = {}  # EAGLE-3: num_steps, topk, num_draft_tokens, drafter
    mtp: MethodAxes = {}  # multi-token prediction: num_steps, topk, num_draft_tokens
    nextn: MethodAxes = {}  # SGLang's name for mtp
    ngram: MethodAxes = {}  # n-gram lookup: num_draft_tokens and the engine's n-gram knobs
    budget: Dimension = ()  # budgets to try (a list, or {low, high} for optuna)
    topk: Dimension = ()  # top-k caps to try (a list, or {low, high} for optuna)
    window: Dimension = ()  # windows to try, "none" included (a list, or {low, high} for optuna)
    depth_bonus: Axis = ()  # knobs: lists only (KNOB_KEYS)
    rank_probe: Axis = ()  # rank-probe settings to try (true / false / "default")
    vars: Annotated[  # user variables to sweep: each a list, crossed with the other axes
        dict[str, Annotated[tuple[VarValue, ...], BeforeValidator(_axis)]],
        AfterValidator(_var_names),
    ] = {}

    @property
    def methods(self) -> dict[str, dict[str, tuple[Any, ...]]]:
        """The `[space.<method>]` tables written, by method name (aliases resolved)."""
        names = (*METHOD_NAMES, *ALIASES)
        written = [n for n in names if n in self.model_fields_set]
        return {ALIASES.get(n, n): getattr(self, n) for n in written}

    def axes(self) -> dict[str, tuple[Any, ...]]:
        """Decoding-parameter axes the user wrote as lists, in `DECODE_KEYS` order."""
        written = {key: getattr(self, key) for key in DECODE_KEYS if key in self.model_fields_set}
        return {key: v for key, v in written.items() if not isinstance(v, IntRange)}

    def knob_axes(self) -> dict[str, tuple[Any, ...]]:
        """The knob axes written (`KNOB_KEYS`)."""
        return {key: getattr(self, key) for key in KNOB_KEYS if key in self.model_fields_set}

    def ranges(self) -> dict[str, IntRange]:
        """The axes written as `{low, high}` ranges."""
        return {key: v for key in PARAM_KEYS if isinstance(v := getattr(self, key), IntRange)}


class SweepTable(StrictModel):
    # the sweep's name: the store keeps its trials under it (letters, digits, . _ -)
    name: Annotated[str, name_rule(64)]
    description: str = ""  # free text kept with the sweep and shown in its report
    # passes over every config (grid); the most passes a race may run
    repeats: Annotated[int, Field(ge=1, le=1000)] = 2
    # trial order within a pass: interleaved, random (seeded) or sequential
    order: Order = "interleaved"
    seed: int = 0  # seeds the trial order, the race's shuffles and the bench's sampling
    # the config every other one is compared with (e.g. the service's current one)
    baseline: ConfigTable | None = None
    # how the sweep spends its starts: grid (every config each pass), race (drop the clearly
    # worse), optuna (a search), predict (a prediction rules configs out)
    strategy: str = "grid"
    min_repeats: Annotated[int, Field(ge=2, le=1000)] = 3  # race: passes before eliminating
    tolerance: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.03  # relative equivalence margin
    max_trials: Annotated[int, Field(ge=1)] | None = None  # stop planning after this many trials
    # stop planning once the expected duration would pass this many hours
    max_hours: Annotated[float, Field(gt=0.0)] | None = None
    # benches per start of a config (more benches share one restart)
    passes_per_start: Annotated[int, Field(ge=1, le=100)] = 1
    # what the recommendation maximizes (mix: tok/s weighted by [bench] mix)
    objective: Objective = "throughput"
    interleave: Interleave = "trial"  # "request": a pass's configs alternate request by request
    # true/false pin the restart-bound race; "auto" chooses it from the start and bench costs
    restart_bound: Annotated[RestartBoundSetting, BeforeValidator(_restart_bound)] = "auto"
    # how much one start moves a config's level (log-sd), where it is known to exceed the
    # restart-bound race's prior of 3% (e.g. 0.12 on a shared CPU host); none: measured on the
    # store's earlier sweeps where they started a config twice (`plan/spread.py`), else the prior
    start_spread: Annotated[float, Field(gt=0.0, lt=1.0)] | None = None
    trace: str | None = None  # a trace folder (`ddtune trace record`): predictions; "predict"
    # a finite window at least the bench's longest context drafts as "none": refused unless true
    allow_indistinct_windows: bool = False
    # the same failure class on this many consecutive configs checks the baseline (0: off)
    breaker: Annotated[int, Field(ge=0, le=1000)] = 3


class OptunaTable(StrictModel):
    # trials the search proposes before the confirming race
    n_trials: Annotated[int, Field(ge=1, le=100_000)] = 40
    confirm_top: Annotated[int, Field(ge=1, le=100)] = 4  # the best few confirmed by a race
    seed: int | None = None  # default: [sweep] seed


class RetryPolicy(StrictModel):
    # tries of a trial whose start or bench fails (1: no retry)
    attempts: Annotated[int, Field(ge=1, le=20)] = 2
    backoff: Annotated[float, Field(ge=0, le=3600)] = 2.0  # seconds before attempt 2, doubled after


class SpecDocument(StrictModel):
    """The whole TOML document."""

    sweep: SweepTable
    space: SpaceTable | None = None
    configs: list[ConfigTable] = []
    optuna: OptunaTable | None = None
    service: dict[str, Any] = {}
    bench: BenchMatrix = BenchMatrix()
    retry: RetryPolicy = RetryPolicy()
    cluster: ClusterTable = ClusterTable()  # where trials run: cluster.py
    report: ReportOptions = ReportOptions()  # `ddtune sweep report` options, e.g. load_weights


__all__ = [
    "OBJECTIVES",
    "ORDERS",
    "ConfigTable",
    "IntRange",
    "Interleave",
    "Objective",
    "OptunaTable",
    "Order",
    "RestartBoundSetting",
    "RetryPolicy",
    "SpaceTable",
    "SpecDocument",
    "SweepTable",
]
