"""The sweep spec: a TOML file parsed strictly into a `SweepSpec` of objects.

    [sweep]    name, repeats, order (interleaved|random|sequential), seed, baseline,
               strategy (grid|race|optuna|predict), min_repeats, tolerance, max_trials,
               max_hours, passes_per_start, objective, interleave (trial|request:
               a pass's configs take turns request by request; hot services only),
               restart_bound (auto|true|false: a race decided start by start, `RestartBound`)
    [space]    a grid: lists of mode/budget/topk/window and the DDTree knobs
               depth_bonus/rank_probe (+ [space.vars] user variables),
               expanded to their cartesian product; strategy "optuna" also takes
               `{low, high, log}` ranges and searches the space instead
    [optuna]   n_trials, confirm_top, seed (strategy "optuna" only)
    [[configs]] an explicit list of configurations (mode/budget/topk/window + vars)
    [service]  handed to `ddtune.services.ServiceSpec.from_dict`; a command argument
               "{python}" is replaced by the interpreter running ddtune
    [bench]    `ddtune.bench.BenchMatrix`
    [retry]    attempts, backoff (seconds between attempts)
    [cluster]  backend (local | ray) and the service slots of a Ray pool (`cluster.py`);
               not part of the spec hash: a sweep may resume on another pool

The tables are the pydantic models of `schema.py`; decoding parameters go
through `DecodeParams.from_wire`. Every `UserError` carries the full key path
(`UserError.key`, e.g. `configs.1.topk`), and `parse_spec` prefixes the line
it is written on (`lines.py`): `demo.toml:7: unknown key space.budgte; ...`.
Configurations are canonicalised (`DecodeParams.canonical()`) and duplicates
dropped, so `ar` with ten budgets is one configuration. See
docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import itertools
import re
import string
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.bench.matrix import BenchMatrix
from ddtune.errors import UserError
from ddtune.methods import METHOD_ENGINES
from ddtune.params import WIRE_KEYS, DecodeParams, config_hash
from ddtune.sweep.spec.checks import (
    StrategyRules,
    check_budgets,
    check_document,
    check_interleave,
    check_knobs,
)
from ddtune.sweep.spec.cluster import Cluster, build_cluster
from ddtune.sweep.spec.lines import KeyLines
from ddtune.sweep.spec.method_grid import method_grid
from ddtune.sweep.spec.real_bench import served_bench
from ddtune.sweep.spec.schema import (
    ORDERS,
    ConfigTable,
    Interleave,
    Objective,
    OptunaTable,
    Order,
    RestartBoundSetting,
    RetryPolicy,
    SpaceTable,
    SpecDocument,
    SweepTable,
)
from ddtune.sweep.spec.space import SearchSpace
from ddtune.tables import parse_table

if TYPE_CHECKING:
    from ddtune.services.spec import ServiceSpec

PYTHON_PLACEHOLDER = "{python}"  # service.command argument: the Python running ddtune


@dataclass(frozen=True)
class Config:
    """One configuration to try: decoding parameters plus user variables (sorted by name)."""

    params: DecodeParams
    vars: tuple[tuple[str, Any], ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """JSON form (the store's `config_json`): `params.to_wire()` plus the variables."""
        return {**self.params.to_wire(), **dict(self.vars)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], where: str = "") -> Config:
        """Inverse of `to_wire`; keys other than `WIRE_KEYS` are user variables."""
        params = DecodeParams.from_wire({k: v for k, v in data.items() if k in WIRE_KEYS}, where)
        return cls(params, tuple(sorted((k, v) for k, v in data.items() if k not in WIRE_KEYS)))

    def user_vars(self) -> dict[str, Any]:
        return dict(self.vars)

    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.vars)
        return f"{self.params.label()} {extra}".strip()

    def hash(self) -> str:
        return config_hash(self.to_wire())


RESTART_BENCHES = 4  # a restart-bound race's most benches on one start, unless written


@dataclass(frozen=True)
class RestartBound:
    """`[sweep] restart_bound` and the keys a restart-bound race reads its own way.

    `most_benches`: `passes_per_start` as written, else 4 (the race decides 1..most
    per start); `min_passes`: `min_repeats` as written, else 1 (the fewest passes
    before the race may stop as equivalent; eliminations never wait).
    """

    setting: RestartBoundSetting = "auto"
    most_benches: int = RESTART_BENCHES
    min_passes: int = 1
    start_spread: float | None = None  # `[sweep] start_spread`: the start prior's spread


@dataclass
class SweepSpec:
    name: str
    configs: list[Config]  # canonical, unique, baseline excluded
    baseline: Config | None
    service: ServiceSpec
    bench: BenchMatrix
    repeats: int = 2
    order: Order = "interleaved"
    seed: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    strategy: str = "grid"  # the word of `[sweep] strategy` (ddtune.sweep.plan.strategies)
    min_repeats: int = 3
    tolerance: float = 0.03
    max_trials: int | None = None
    max_hours: float | None = None
    passes_per_start: int = 1
    objective: Objective = "throughput"
    interleave: Interleave = "trial"
    restart_bound: RestartBound = field(default_factory=RestartBound)
    optuna: OptunaTable | None = None  # strategy "optuna": the search settings
    search: SearchSpace | None = None  # strategy "optuna": the space searched
    text: str = ""  # the TOML as written, stored with the sweep
    source: str = "<spec>"
    base_dir: str | None = None  # relative paths in the spec resolve here
    cluster: Cluster = field(default_factory=Cluster)
    trace: str | None = None  # `[sweep] trace`, resolved against the spec's folder
    allow_indistinct_windows: bool = False  # `[sweep]`: see sweep/checks/before_stop.py
    breaker: int = 3  # `[sweep] breaker`: see sweep/run/policy.py (0: off)
    notes: list[str] = field(default_factory=list)  # for plan and run: old key names used
    report: dict[str, Any] = field(default_factory=dict)  # the `[report]` keys as written

    @property
    def hash(self) -> str:
        """Hash of the parsed content: comments, layout and [cluster] do not change it."""
        if not self.text:
            return ""
        return config_hash({k: v for k, v in tomllib.loads(self.text).items() if k != "cluster"})

    def all_configs(self) -> list[tuple[Config, bool]]:
        """(config, is_baseline), baseline first."""
        head = [(self.baseline, True)] if self.baseline else []
        return head + [(c, False) for c in self.configs]

    def params_by_label(self) -> dict[str, DecodeParams]:
        """Each config's label and its parameters, baseline first."""
        return {config.label(): config.params for config, _ in self.all_configs()}


def read_with(path: str | Path, strategies: Mapping[str, StrategyRules]) -> SweepSpec:
    """`parse_with` of the file at `path` (`ddtune.sweep.plan.read_spec` passes the table)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read sweep spec {path}: {exc.strerror}") from None
    return parse_with(text, strategies, source=str(path), base_dir=path.parent.resolve())


def parse_with(
    text: str,
    strategies: Mapping[str, StrategyRules],
    source: str = "<spec>",
    base_dir: Path | None = None,
) -> SweepSpec:
    """Parse and validate the whole spec (service and bench included); `strategies` is the
    table of the strategies `[sweep] strategy` may name, each with its own rules.

    Relative file paths in [bench] resolve against `base_dir` (the spec's folder).
    A `UserError` names `source:line` of the key it is about.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}{_none_hint(text, exc)}") from None
    try:
        parsed = parse_table(SpecDocument, doc)
        return _build(parsed, _rules(parsed, strategies), text, source, base_dir)
    except UserError as exc:
        line = KeyLines(text).line_of(_as_written(exc.key, doc)) if exc.key else None
        where = f"{source}:{line}" if line else source
        raise UserError(f"{where}: {exc}", key=exc.key) from None


def _as_written(key: str, doc: Mapping[str, Any]) -> str:
    """`service.control` as `service.kind` where the spec writes the old name only (its line)."""
    from ddtune.services.spec import RENAMED

    service = doc.get("service")
    for old, new in RENAMED.items():
        if key == f"service.{new}" and isinstance(service, Mapping) and new not in service:
            return f"service.{old}" if old in service else key
    return key


BARE_NONE = re.compile(r"^\s*([\w.-]+)\s*=\s*(None|none|null|nil|NULL)\s*(#.*)?$")


def _none_hint(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """TOML has no null: `window = None` gets the hint to write the string "none"."""
    at = re.search(r"at line (\d+)", str(exc))
    lines, number = text.splitlines(), int(at.group(1)) if at else 0
    line = lines[number - 1] if 0 < number <= len(lines) else ""
    found = BARE_NONE.match(line)
    if not found:
        return ""
    key = found.group(1)
    if key.rsplit(".", 1)[-1] == "window":
        return f'; TOML has no None: write {key} = "none" (the whole context)'
    return f"; TOML has no None: leave {key} out for its default, or quote a string value"


def _rules(doc: SpecDocument, strategies: Mapping[str, StrategyRules]) -> StrategyRules:
    """The strategy `[sweep] strategy` names, from the table."""
    word = doc.sweep.strategy
    if word not in strategies:
        names = [repr(name) for name in strategies]
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise UserError(
            f"sweep.strategy {word!r} is not a strategy: use {listed}", key="sweep.strategy"
        )
    return strategies[word]


def _build(
    doc: SpecDocument, rules: StrategyRules, text: str, source: str, base_dir: Path | None
) -> SweepSpec:
    from ddtune.services.spec import old_names

    check_document(doc, rules)
    check_budgets(doc)
    baseline = doc.sweep.baseline
    searched = rules.searches
    found = [(_config(baseline, "sweep.baseline"), "sweep.baseline")] if baseline else []
    found += [(c, "space") for c in _grid(doc.space)] if doc.space and not searched else []
    found += [(_config(t, f"configs.{i}"), f"configs.{i}") for i, t in enumerate(doc.configs)]
    search = SearchSpace.from_space(doc.space) if searched and doc.space else None
    if not found and search is None:
        raise UserError("no configurations: add a [space] grid or [[configs]] tables")
    service = _service(doc.service)
    check_interleave(doc, service.control)
    check_knobs(doc, service.engine, _placeholders(service))
    _check_vars_used(found + _search_vars(search), service)
    _check_methods(found, service)
    base = found[0][0] if baseline else None
    configs = [c for c in dict.fromkeys(c for c, _ in found) if c != base]
    bench = doc.bench.resolve_paths(base_dir) if base_dir else doc.bench
    first = found[0][0] if found else _first_searched(search)
    written = doc.bench.model_fields_set  # before resolve_paths, which copies every field
    bench, bench_note = served_bench(bench, written, service, first, base_dir)
    sweep = doc.sweep
    return SweepSpec(
        name=doc.sweep.name,
        configs=configs,
        baseline=base,
        service=service,
        bench=bench,
        repeats=rules.repeats(doc.sweep),
        order=doc.sweep.order,
        seed=doc.sweep.seed,
        retry=doc.retry,
        strategy=sweep.strategy,
        min_repeats=sweep.min_repeats,
        tolerance=sweep.tolerance,
        max_trials=sweep.max_trials,
        max_hours=sweep.max_hours,
        passes_per_start=sweep.passes_per_start,
        objective=sweep.objective,
        interleave=sweep.interleave,
        restart_bound=_restart_bound(sweep),
        optuna=(doc.optuna or OptunaTable()) if searched else None,
        search=search,
        text=text,
        source=source,
        base_dir=str(base_dir) if base_dir else None,
        cluster=build_cluster(doc.cluster, doc.service, _service),
        trace=_trace_path(sweep.trace, base_dir),
        allow_indistinct_windows=sweep.allow_indistinct_windows,
        breaker=sweep.breaker,
        notes=old_names(doc.service) + ([bench_note] if bench_note else []),
        report=doc.report.model_dump(exclude_unset=True),
    )


def _first_searched(search: SearchSpace | None) -> Config:
    """A config of a search space (what the service is started with first, for the bench)."""
    if search is None:
        return Config(DecodeParams())
    params, user = search.covering()[0]
    return Config(params, tuple(sorted(user.items())))


def _trace_path(trace: str | None, base_dir: Path | None) -> str | None:
    if trace is None:
        return None
    path = Path(trace).expanduser()
    return str(path if path.is_absolute() or base_dir is None else (base_dir / path).resolve())


def _restart_bound(sweep: SweepTable) -> RestartBound:
    written = sweep.model_fields_set
    return RestartBound(
        sweep.restart_bound,
        sweep.passes_per_start if "passes_per_start" in written else RESTART_BENCHES,
        sweep.min_repeats if "min_repeats" in written else 1,
        sweep.start_spread,
    )


def _search_vars(search: SearchSpace | None) -> list[tuple[Config, str]]:
    """One config per searched variable value, so unused variables are refused as for a grid."""
    if search is None:
        return []
    return [
        (Config(DecodeParams(), ((name, value),)), "space.vars")
        for name, values in search.vars.items()
        for value in values
    ]


def _config(table: ConfigTable, where: str) -> Config:
    """One explicit configuration, canonical; errors are keyed `<where>.<param>`."""
    params = DecodeParams.from_wire(table.params_wire(), where).canonical()
    return Config(params, tuple(sorted(table.vars.items())))


def _grid(space: SpaceTable) -> list[Config]:
    """The cartesian product of the axes, in spec order; each value checked on its own."""
    if space.method or space.methods:
        return [Config(params, user) for params, user in method_grid(space)]
    axes = space.axes()
    for key, choices in axes.items():
        for choice in choices:
            DecodeParams.from_wire({key: choice}, "space")
    var_axes = dict(sorted(space.vars.items()))
    names = [*axes, *var_axes]
    configs = []
    for combo in itertools.product(*axes.values(), *var_axes.values()):
        values = dict(zip(names, combo, strict=True))
        params = DecodeParams.from_wire({k: values[k] for k in axes}, "space").canonical()
        configs.append(Config(params, tuple((k, values[k]) for k in var_axes)))
    return configs


def _service(table: dict[str, Any]) -> ServiceSpec:
    """The [service] table; a `{python}` argument becomes this interpreter's path."""
    from ddtune.services.spec import ServiceSpec

    table = dict(table)
    if isinstance(table.get("command"), list):
        table["command"] = [
            sys.executable if a == PYTHON_PLACEHOLDER else a for a in table["command"]
        ]
    try:
        return ServiceSpec.from_dict(table)
    except UserError as exc:
        if exc.key is None:  # no key named: point at the [service] table itself
            raise UserError(str(exc), key="service") from None
        raise


def _placeholders(service: ServiceSpec) -> set[str] | None:
    """The placeholders service.command and service.env use; None for hooks (which get
    every value as DDTUNE_<NAME>) and a systemd unit that keeps its own ExecStart."""
    if service.control == "hooks" or (service.control == "systemd" and not service.command):
        return None
    texts = list(service.command) + list(service.env.values())
    return {name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name}


def _check_methods(found: list[tuple[Config, str]], service: ServiceSpec) -> None:
    """Every config's method spelled by the service's engine (`{method_args}`), or checked
    against that engine's knobs; a method's knobs that no placeholder carries are refused."""
    placeholders = _placeholders(service)
    splices = placeholders is None or "method_args" in placeholders
    for config, where in found:
        params = config.params
        try:
            if placeholders is not None and "method_args" in placeholders:
                service.method_args(params)  # the engine's spelling, checked
            elif params.method is not None and service.engine in METHOD_ENGINES:
                params.method_config().check_for(service.engine, params.window)
        except UserError as exc:
            raise UserError(f"{where}: {exc}", key=where) from None
        if params.method_knobs and not splices:
            raise UserError(
                f"{where}: {params.label()} sets method knobs that service.command does not "
                "carry; add a {method_args} argument (the engine's flags for the method)",
                key=where,
            )


def _check_vars_used(found: list[tuple[Config, str]], service: ServiceSpec) -> None:
    """A user variable that no placeholder uses would be silently ignored: refuse it."""
    if service.control not in ("process", "hot"):
        return  # hooks get every variable as DDTUNE_<NAME>; systemd renders its own drop-in
    used = _placeholders(service) or set()
    for config, where in found:
        for name, _ in config.vars:
            if name not in used:
                raise UserError(
                    f"{where}.vars: variable {name!r} is not used by service.command or "
                    f"service.env; add a {{{name}}} placeholder there (with a default in "
                    "[service.vars]) or remove it",
                    key=f"{where}.vars",
                )


__all__ = [
    "ORDERS",
    "RESTART_BENCHES",
    "Config",
    "RestartBound",
    "RetryPolicy",
    "SweepSpec",
    "read_with",
    "parse_with",
]
