"""What strategy "predict" would spend on a sweep, read before any start: the predicting
race's first pass as its own rules open it (`races/predicting.py`), at the sweep's costs.

    path = predicted_path(spec, forecast, costs)   # None: a trace cannot predict this sweep
    path = outputs_path(spec, costs)               # no trace: the baseline's answers predict
    path.starts      # (label, why it starts), in the order they start
    path.never       # label -> the config that dominates it: never started
    path.estimate    # its starts, benches and seconds (None without costs)
    unpredictable(spec)                            # why not, in words (None: it can)

The figures hold when the predictions do: every config started is confirmed by its
first start. A miss corrects the predictions and costs a start or two more; at worst
the sweep runs as the restart-bound race would. `sweep plan` prints them beside the
race's (`sweep/plan_view.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddtune.engines import get_engine
from ddtune.methods import needs_trace
from ddtune.sweep.plan.costs import Estimate, TrialCosts, timed
from ddtune.sweep.plan.races.by_start import prior_benches
from ddtune.sweep.plan.races.predicting import PredictRace, dominator, most_verify_tokens
from ddtune.sweep.plan.strategies.restart_bound import start_settings
from ddtune.sweep.spec.parse import SweepSpec
from ddtune.sweep.store.modes import StartSpread, SweepMode
from ddtune.trace.chains.forecast import chain_anchors
from ddtune.trace.forecast import Forecast

BASELINE_ROLE = "the baseline: what a plain step costs"
FEWEST_ROLE = "the fewest verify tokens: fixes what a round costs"
MOST_ROLE = "the most verify tokens: fixes what a round costs"
ONLY_ROLE = "fixes what a round costs"
BEST_ROLE = "could be the fastest, by the prediction"
UNKNOWN_ROLE = "the trace does not predict it: it gets a start as in a race"
OUTPUTS_ROLE = (
    "the baseline: its timed forwards fix what a round costs (and its T = 0 answers every "
    "n-gram config's acceptance, exactly)"
)
ANCHOR_ROLE = "a chain's largest num_steps: its counts per draft position predict the smaller"
WINNER = "the config its answers predict fastest"


@dataclass(frozen=True)
class PredictedPath:
    """The starts of predict, then confirm, when its predictions hold."""

    starts: tuple[tuple[str, str], ...]  # (label, why it starts), in order
    never: dict[str, str]  # label -> the config that dominates it
    estimate: Estimate | None  # None without costs


def probes_forward(spec: SweepSpec) -> bool:
    """Does the baseline's first bench time forwards on its server (T = 0, an engine that
    takes token ids)? Then no config is started only to fix what a round costs."""
    return spec.bench.temperature == 0 and get_engine(spec.service.engine).returns_token_ids


def predicts_from_outputs(spec: SweepSpec) -> bool:
    """No trace needed: every config's rounds follow from the baseline's T = 0 answers (and,
    on an engine that counts drafts per position, chains from their largest K's run)."""
    methods = {c.params.method or c.params.mode for c, _ in spec.all_configs()}
    counts = get_engine(spec.service.engine).counts_drafts
    return spec.trace is None and not needs_trace(methods, counts) and probes_forward(spec)


def outputs_path(
    spec: SweepSpec, costs: TrialCosts | None, measured: StartSpread | None = None
) -> PredictedPath | None:
    """Strategy predict without a trace: the baseline, then the config its answers predict
    fastest (confirmed by its start); None where its answers cannot predict the sweep."""
    if not predicts_from_outputs(spec) or unpredictable(spec) is not None:
        return None
    race = _first_pass(spec, None, costs, measured)
    configs = spec.params_by_label()
    anchors = [(x, ANCHOR_ROLE) for x in dict.fromkeys(chain_anchors(configs).values())]
    starts = ((race.baseline or "the baseline", OUTPUTS_ROLE), *anchors, (WINNER, BEST_ROLE))
    estimate = None if costs is None else _estimate(race, len(starts), True, costs)
    return PredictedPath(starts, {}, estimate)


def outputs_words(spec: SweepSpec) -> str:
    """What predicts a sweep without a trace, in words: the baseline's answers (n-gram) and
    each chain's largest num_steps (its counts per draft position)."""
    configs = spec.params_by_label()
    parts = []
    if any(p.method == "ngram" for p in configs.values()):
        parts.append(
            "the baseline's T = 0 answers, recorded as token ids by its first bench, fix every "
            "n-gram config's acceptance exactly (vLLM's lookup replayed on them)"
        )
    if anchors := list(dict.fromkeys(chain_anchors(configs).values())):
        parts.append(
            f"the largest num_steps of each chain ({', '.join(anchors)}) starts after the "
            "baseline, and its acceptance counted per draft position estimates every smaller "
            "num_steps (an estimate: the check at each start says how close)"
        )
    return "; ".join(parts) or "the baseline's T = 0 answers"


def unpredictable(spec: SweepSpec, forecast: Forecast | None = None) -> str | None:
    """Why strategy "predict" could not predict this sweep (from `forecast`, where given);
    None when it could."""
    if spec.trace is None and not predicts_from_outputs(spec):
        return (
            "the spec has no [sweep] trace (only n-gram spaces, and chains on vLLM, are "
            "predicted without one)"
        )
    if forecast is not None and not _predicts_a_config(spec, forecast):
        return "the trace predicts none of the sweep's configs but the baseline"
    if spec.bench.temperature != 0:
        return f"the bench runs at T = {spec.bench.temperature:g}; a trace predicts T = 0 only"
    if spec.cluster.backend != "local":
        return "the ray backend does not reuse a start"
    if spec.interleave == "request":
        return 'interleave = "request" shares one server among a pass\'s configs'
    return None


def predicted_path(
    spec: SweepSpec,
    forecast: Forecast,
    costs: TrialCosts | None,
    measured: StartSpread | None = None,
) -> PredictedPath | None:
    """Strategy predict's starts for `spec` from `forecast`; None where it cannot predict.
    `measured`: the start spread the store's earlier sweeps measured (`spread.py`)."""
    if unpredictable(spec, forecast) is not None:
        return None
    race = _first_pass(spec, forecast, costs, measured)
    starts = [(x, _pin_role(x, race, forecast)) for x in race.pinned]
    rest = [x for x in race.queue if x not in race.pinned]
    predicted = [x for x in rest if x in forecast.shapes]
    if predicted:
        starts.append((predicted[0], BEST_ROLE))
    starts += [(x, UNKNOWN_ROLE) for x in rest if x not in forecast.shapes]
    never = {x: dominator(forecast, x, race.contenders) or "another config" for x in race.left_out}
    kept = bool(predicted)  # the config that could be the fastest keeps its start
    estimate = None if costs is None else _estimate(race, len(starts), kept, costs)
    return PredictedPath(tuple(starts), never, estimate)


def _predicts_a_config(spec: SweepSpec, forecast: Forecast) -> bool:
    return any(c.label() in forecast.shapes for c, base in spec.all_configs() if not base)


def _first_pass(
    spec: SweepSpec,
    forecast: Forecast | None,
    costs: TrialCosts | None,
    measured: StartSpread | None = None,
) -> PredictRace:
    """The predicting race as it opens, before any start (its pass 1 ordered)."""
    start_s, bench_s = (costs.start_s, costs.bench_s) if costs is not None else (None, None)
    most = spec.restart_bound.most_benches
    mode = SweepMode(True, "", start_s, bench_s, most, spread=measured)
    labels = tuple(config.label() for config, _ in spec.all_configs())
    baseline = spec.baseline.label() if spec.baseline is not None else None
    settings = start_settings(spec, mode)
    probing = probes_forward(spec)
    return PredictRace(labels, baseline, settings, spec.seed, forecast=forecast, probing=probing)


def _pin_role(label: str, race: PredictRace, forecast: Forecast) -> str:
    if label == race.baseline:
        return BASELINE_ROLE
    tokens = {x: most_verify_tokens(forecast, x) for x in race.pinned if x != race.baseline}
    if len(tokens) == 1:
        return ONLY_ROLE
    return FEWEST_ROLE if tokens[label] == min(tokens.values()) else MOST_ROLE


def _estimate(race: PredictRace, starts: int, kept: bool, costs: TrialCosts) -> Estimate:
    """Each start benched as a start of pass 1 is before any data; the config that could
    be the fastest (`kept`) gets every bench a start may hold (a close call)."""
    per_start = prior_benches(race.settings)
    extra = race.settings.most_benches - per_start if kept else 0
    return timed(starts, starts * per_start + extra, costs)


__all__ = [
    "PredictedPath",
    "outputs_path",
    "outputs_words",
    "predicted_path",
    "predicts_from_outputs",
    "probes_forward",
    "unpredictable",
]
