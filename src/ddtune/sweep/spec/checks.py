"""Cross-key checks of a sweep spec: strategy, race and search settings that must agree.

Each check raises a one-line `UserError` whose `.key` names the setting to
change (`parse_spec` adds the file and line). See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ddtune.engines import get_engine
from ddtune.errors import UserError
from ddtune.params import KNOB_KEYS
from ddtune.sweep.spec.schema import ConfigTable, IntRange, SpecDocument

RACE_ONLY = ("min_repeats", "max_trials", "max_hours")
RACE_REPEATS = 10  # default most passes of a race (a grid's default stays 2)


def effective_repeats(doc: SpecDocument) -> int:
    """`repeats` as written; unwritten, 2 for a grid and `RACE_REPEATS` for a race or search."""
    sweep = doc.sweep
    if "repeats" in sweep.model_fields_set or sweep.strategy == "grid":
        return sweep.repeats
    return max(RACE_REPEATS, sweep.min_repeats)


def check_strategy(doc: SpecDocument) -> None:
    """Refuse settings that the chosen strategy would ignore or cannot honour."""
    sweep, strategy = doc.sweep, doc.sweep.strategy
    if strategy != "optuna":
        _no_search_settings(doc)
    if strategy == "grid":
        for name in RACE_ONLY:
            if name in sweep.model_fields_set:
                _fail(f"sweep.{name}", 'only applies to strategy = "race" or "optuna"')
    else:
        if sweep.order != "interleaved":
            _fail("sweep.order", f'strategy = "{strategy}" runs interleaved passes; remove order')
        if sweep.min_repeats > effective_repeats(doc):
            _fail(
                "sweep.min_repeats",
                f"({sweep.min_repeats}) is above sweep.repeats ({sweep.repeats}), the most "
                "passes a race runs",
            )
    if strategy == "optuna":
        _search_inputs(doc)
    if strategy == "predict":
        _predict(doc)
    _restart_bound(doc)
    _passes_per_start(doc)
    if sweep.objective == "speedup" and sweep.baseline is None:
        _fail(
            "sweep.baseline",
            'is required: objective = "speedup" is a ratio to the baseline '
            '(e.g. baseline = { mode = "ar" })',
        )


def check_budgets(doc: SpecDocument) -> None:
    """One rule, one message: every budget a spec writes is at least 1 (a tree of no node
    drafts nothing; `mode = "ar"` is no drafting). A negative budget and 0 say the same."""
    for key, value in _written_budgets(doc):
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            _fail(
                key,
                "must be at least 1 (the tree's nodes besides the root; use mode = "
                f'"ar" for no drafting); got {value}',
            )


def _written_budgets(doc: SpecDocument) -> Iterator[tuple[str, Any]]:
    """(key, value) of every budget the spec writes: configs, baseline, [space] lists and
    ranges, and the [space.<method>] tables."""
    if doc.sweep.baseline is not None:
        yield "sweep.baseline.budget", doc.sweep.baseline.budget
    for i, table in enumerate(doc.configs):
        yield f"configs.{i}.budget", table.budget
    if doc.space is None:
        return
    written = doc.space.budget
    values = [written.low, written.high] if isinstance(written, IntRange) else list(written)
    yield from (("space.budget", v) for v in values)
    for name, axes in doc.space.methods.items():
        yield from ((f"space.{name}.budget", v) for v in axes.get("budget", ()))


def check_interleave(doc: SpecDocument, service_control: str) -> None:
    """`interleave = "request"` switches one hot server's config before every request."""
    if doc.sweep.interleave != "request":
        return
    needs = {
        "service.control": (service_control == "hot", "[service] control = 'hot'"),
        "sweep.order": (doc.sweep.order == "interleaved", "order = 'interleaved'"),
        "sweep.passes_per_start": (doc.sweep.passes_per_start == 1, "passes_per_start = 1"),
        "bench.concurrency": (doc.bench.concurrency == 1, "[bench] concurrency = 1"),
        "bench.load": (doc.bench.load is None, "no [bench.load] levels"),
        "cluster.backend": (doc.cluster.backend == "local", "[cluster] backend = 'local'"),
    }
    for key, (ok, wanted) in needs.items():
        if not ok:
            _fail(
                key,
                f"sweep.interleave = 'request' switches one hot server's config between "
                f"single requests, so it needs {wanted}; or set interleave = 'trial'",
            )


def check_knobs(doc: SpecDocument, engine: str, placeholders: set[str] | None) -> None:
    """A DDTree knob needs a ddtree config, an engine that honours it and, where the
    service renders a command, a placeholder that carries it (`placeholders`; None: hooks,
    which get every value as DDTUNE_<NAME>)."""
    honoured = get_engine(engine).knobs
    for key, knob, mode_ok in _written_knobs(doc):
        if knob not in honoured:
            _fail(
                key,
                f"is a DDTree knob that engine {engine!r} cannot honour (only "
                f"{_knob_kinds(knob)} reads it); remove it or set service.engine",
            )
        if not mode_ok:
            _fail(key, "shapes DDTree trees: it applies to mode 'ddtree' only")
        if placeholders is not None and knob not in placeholders:
            _fail(
                key,
                f"is not used by service.command or service.env; add a {{{knob}}} placeholder "
                f"(e.g. `--{knob.replace('_', '-')}`, `{{{knob}}}` for python -m ddtune.launchers)",
            )


def _written_knobs(doc: SpecDocument) -> Iterator[tuple[str, str, bool]]:
    """(key, knob, whether a ddtree config carries it) for every knob the spec writes."""
    tables: list[tuple[str, ConfigTable]] = [(f"configs.{i}", t) for i, t in enumerate(doc.configs)]
    if doc.sweep.baseline is not None:
        tables.append(("sweep.baseline", doc.sweep.baseline))
    for where, table in tables:
        for knob in KNOB_KEYS:
            if knob in table.model_fields_set:
                yield f"{where}.{knob}", knob, table.mode in ("ddtree", None)
    if doc.space is not None:
        modes = doc.space.mode or ("ddtree",)
        for knob in doc.space.knob_axes():
            yield f"space.{knob}", knob, "ddtree" in modes


def _knob_kinds(knob: str) -> str:
    from ddtune.engines import ENGINES

    kinds = [name for name in ENGINES if knob in get_engine(name).knobs]
    return ", ".join(repr(k) for k in kinds) or "no engine"


def _no_search_settings(doc: SpecDocument) -> None:
    if doc.optuna is not None:
        _fail("optuna", 'is only read with strategy = "optuna"; remove it or set the strategy')
    if doc.space is not None:
        for key in doc.space.ranges():
            _fail(
                f"space.{key}",
                'a {low, high} range needs strategy = "optuna"; list the values for a grid or a race',
            )


def _search_inputs(doc: SpecDocument) -> None:
    if doc.configs:
        _fail(
            "configs",
            'strategy = "optuna" searches [space]; remove [[configs]] '
            "(the baseline goes in sweep.baseline)",
        )
    if doc.space is None:
        _fail("space", 'strategy = "optuna" needs a [space] with ranges or lists to search')


def _restart_bound(doc: SpecDocument) -> None:
    """`restart_bound` belongs to a race; pinned on, it reuses starts in this process."""
    sweep = doc.sweep
    pinned = sweep.restart_bound != "auto"  # "auto" (the default) suits every strategy
    if "restart_bound" in sweep.model_fields_set and pinned and sweep.strategy != "race":
        _fail("sweep.restart_bound", 'only applies to strategy = "race" (or write "auto")')
    if sweep.restart_bound is not True:
        return
    if doc.cluster.backend != "local":
        _fail("sweep.restart_bound", "reuses a start in this process: use cluster.backend local")
    if sweep.interleave == "request":
        _fail(
            "sweep.restart_bound",
            "= true restarts for every config; configs taking turns request by request "
            "(interleave = 'request') share one hot server: set one of them differently",
        )


def _predict(doc: SpecDocument) -> None:
    """A predicting race needs its trace, and races restart-bound: starts in this process."""
    sweep = doc.sweep
    if sweep.trace is None:
        _fail(
            "sweep.trace",
            'is required by strategy = "predict": the trace folder to predict from (record it '
            "with `ddtune trace record --spec SPEC --out DIR`)",
        )
    if doc.cluster.backend != "local":
        _fail(
            "sweep.strategy", '"predict" reuses a start in this process: use cluster.backend local'
        )
    if sweep.interleave == "request":
        _fail(
            "sweep.interleave",
            '"request" shares one hot server among a pass\'s configs; strategy = "predict" '
            "decides start by start: remove interleave",
        )


def _passes_per_start(doc: SpecDocument) -> None:
    sweep = doc.sweep
    k = sweep.passes_per_start
    if k == 1:
        return
    if sweep.order == "random":
        _fail("sweep.passes_per_start", "needs order interleaved or sequential, not random")
    if doc.cluster.backend != "local":
        _fail("sweep.passes_per_start", "reuses a start in this process: use cluster.backend local")
    if sweep.restart_bound is True or sweep.strategy == "predict":
        return  # the most benches of one start: the restart-bound race decides 1..k
    counts = [("repeats", effective_repeats(doc))]
    if sweep.strategy != "grid":
        counts.append(("min_repeats", sweep.min_repeats))
    for name, value in counts:
        if value % k:
            _fail(
                "sweep.passes_per_start",
                f"({k}) must divide sweep.{name} ({value}): every start serves {k} passes",
            )


def _fail(key: str, message: str) -> None:
    raise UserError(f"{key} {message}", key=key)


__all__ = ["RACE_REPEATS", "check_budgets", "check_knobs", "check_strategy", "effective_repeats"]
