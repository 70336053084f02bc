"""Cross-key checks of a sweep spec: the rules of every strategy, interleaving, DDTree knobs.

Each check raises a one-line `UserError` whose `.key` names the setting to
change (`parse_spec` adds the file and line). The rules of one strategy are its
own (`StrategyRules.check`, in `ddtune.sweep.plan.strategies`): this module
never asks which strategy a spec names. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn, Protocol

from ddtune.engines import get_engine
from ddtune.errors import UserError
from ddtune.params import KNOB_KEYS
from ddtune.sweep.spec.schema import ConfigTable, IntRange, SpecDocument, SweepTable


class StrategyRules(Protocol):
    """What reading a spec asks of its `[sweep] strategy`: the strategy's class, from the
    table the caller passes (`ddtune.sweep.plan.strategies.STRATEGIES`)."""

    name: str  # the word `[sweep] strategy` spells it with
    searches: bool  # [space] is searched (ranges allowed), not crossed into a grid

    def repeats(self, sweep: SweepTable) -> int:
        """The most passes when `repeats` is not written."""
        ...

    def check(self, doc: SpecDocument) -> None:
        """Refuse settings this strategy would ignore or cannot honour (`fail`)."""
        ...


def check_document(doc: SpecDocument, rules: StrategyRules) -> None:
    """The rules of every strategy, then the chosen one's own (`rules.check`)."""
    sweep = doc.sweep
    if sweep.objective == "speedup" and sweep.baseline is None:
        fail(
            "sweep.baseline",
            'is required: objective = "speedup" is a ratio to the baseline '
            '(e.g. baseline = { mode = "ar" })',
        )
    if sweep.restart_bound is True:
        _restart_bound_on(doc)
    if sweep.passes_per_start != 1:
        _passes_per_start(doc)
    rules.check(doc)


def check_budgets(doc: SpecDocument) -> None:
    """One rule, one message: every budget a spec writes is at least 1 (a tree of no node
    drafts nothing; `mode = "ar"` is no drafting). A negative budget and 0 say the same."""
    for key, value in _written_budgets(doc):
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            fail(
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
            fail(
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
            fail(
                key,
                f"is a DDTree knob that engine {engine!r} cannot honour (only "
                f"{_knob_engines(knob)} reads it); remove it or set service.engine",
            )
        if not mode_ok:
            fail(key, "shapes DDTree trees: it applies to mode 'ddtree' only")
        if placeholders is not None and knob not in placeholders:
            fail(
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


def _knob_engines(knob: str) -> str:
    from ddtune.engines import ENGINES

    engines = [name for name in ENGINES if knob in get_engine(name).knobs]
    return ", ".join(repr(k) for k in engines) or "no engine"


def _restart_bound_on(doc: SpecDocument) -> None:
    """`restart_bound = true` reuses a start in this process, one config at a time."""
    if doc.cluster.backend != "local":
        fail("sweep.restart_bound", "reuses a start in this process: use cluster.backend local")
    if doc.sweep.interleave == "request":
        fail(
            "sweep.restart_bound",
            "= true restarts for every config; configs taking turns request by request "
            "(interleave = 'request') share one hot server: set one of them differently",
        )


def _passes_per_start(doc: SpecDocument) -> None:
    """More benches per start need an order that keeps a config's passes together."""
    if doc.sweep.order == "random":
        fail("sweep.passes_per_start", "needs order interleaved or sequential, not random")
    if doc.cluster.backend != "local":
        fail("sweep.passes_per_start", "reuses a start in this process: use cluster.backend local")


def passes_divide(doc: SpecDocument, counts: list[tuple[str, int]]) -> None:
    """Every start serves `passes_per_start` passes: it must divide each count of passes."""
    k = doc.sweep.passes_per_start
    for name, value in counts:
        if value % k:
            fail(
                "sweep.passes_per_start",
                f"({k}) must divide sweep.{name} ({value}): every start serves {k} passes",
            )


def fail(key: str, message: str) -> NoReturn:
    """A one-line `UserError` keyed by `key` (`parse_spec` adds the file and line)."""
    raise UserError(f"{key} {message}", key=key)


__all__ = [
    "StrategyRules",
    "check_budgets",
    "check_document",
    "check_interleave",
    "check_knobs",
    "fail",
    "passes_divide",
]
