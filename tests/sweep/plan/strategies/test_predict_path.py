"""Strategy predict's path read before any start (`predict_path.py`): the predicting race's
first pass as its rules open it, at the sweep's costs; and when a trace cannot predict."""

from __future__ import annotations

import math

import pytest

from ddtune.sweep.plan.costs import TrialCosts
from ddtune.sweep.plan.races.by_start import prior_benches
from ddtune.sweep.plan.strategies.predict_path import predicted_path, unpredictable
from ddtune.sweep.plan.strategies.restart_bound import start_settings
from ddtune.sweep.store.modes import SweepMode
from ddtune.trace.forecast import Forecast
from ddtune.trace.round_cost import Shape

SPEC = """
[sweep]
name = "p"
strategy = "predict"
trace = "t"
seed = 0
baseline = { mode = "ar" }
[space]
budget = [4, 8, 16]
topk = [2, 4]
"""
COSTS = TrialCosts(480.0, 300.0, "the test")


def _forecast(spec) -> Forecast:
    """Tokens a round saturate with the budget; topk 4 commits as much as topk 2 at the same
    verify tokens, so every topk 4 config ties its topk 2 twin and the cheaper one wins."""
    shapes = {}
    for config, _ in spec.all_configs():
        p = config.params
        if p.mode == "ar":
            shapes[config.label()] = {w: Shape("ar", 1.0, 1, 0.0, 1.0) for w in ("short", "long")}
            continue
        r = 1 + 3.0 * (1 - math.exp(-p.budget / 6))
        shape = Shape("ddtree", r, p.budget + 1, 1.0, r)
        shapes[config.label()] = {"short": shape, "long": shape}
    acceptance = {x: s["short"].acceptance for x, s in shapes.items()}
    return Forecast(shapes, acceptance, lambda x: (x != "ar", x.endswith("k4"), x))


def test_with_forwards_timed_on_the_baseline_the_path_is_the_baseline_and_the_best(spec_text):
    """ddtune's server takes token ids: the baseline's first bench times forwards over n
    tokens, so no config starts only to fix what a round costs."""
    spec = spec_text.parse(SPEC)
    path = predicted_path(spec, _forecast(spec), COSTS)
    assert path is not None and path.estimate is not None
    assert [why for _, why in path.starts] == [
        "the baseline: what a plain step costs",
        "could be the fastest, by the prediction",
    ]
    assert path.estimate.restarts == 2


def test_the_path_is_the_baseline_the_two_ends_and_the_best_predicted(spec_text):
    """An engine that takes no token ids: nothing times its forwards, the two ends fix it."""
    spec = spec_text.parse(SPEC, 'engine = "openai"\nmodel = "target"\n')
    forecast = _forecast(spec)
    path = predicted_path(spec, forecast, COSTS)
    assert path is not None and path.estimate is not None
    labels = [label for label, _ in path.starts]
    assert labels[:3] == ["ar", "ddtree b4 k2 wnone", "ddtree b16 k2 wnone"]
    assert [why for _, why in path.starts[:3]] == [
        "the baseline: what a plain step costs",
        "the fewest verify tokens: fixes what a round costs",
        "the most verify tokens: fixes what a round costs",
    ]
    assert len(labels) == 4 and path.starts[3][1] == "could be the fastest, by the prediction"
    assert path.never == {f"ddtree b{b} k4 wnone": f"ddtree b{b} k2 wnone" for b in (4, 8, 16)}
    settings = start_settings(spec, SweepMode(True, "", 480.0, 300.0, 4))
    per_start = prior_benches(settings)
    benches = 4 * per_start + settings.most_benches - per_start  # the best keeps its start
    assert (path.estimate.restarts, path.estimate.benches) == (4, benches)
    assert path.estimate.seconds == 4 * 480.0 + benches * 300.0
    assert predicted_path(spec, forecast, None).estimate is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("extra", "service", "why"),
    [
        ("", "", None),
        ("[bench]\ntemperature = 0.7\n", "", "the bench runs at T = 0.7; a trace predicts T = 0"),
    ],
)
def test_a_trace_predicts_t0_only(spec_text, extra, service, why):
    spec = spec_text.parse(SPEC + extra, service)
    assert unpredictable(spec) == (None if why is None else why + " only")
    found = predicted_path(spec, _forecast(spec), COSTS)
    assert (found is None) is (why is not None)


def test_a_trace_of_the_baseline_alone_gives_no_path(spec_text):
    spec = spec_text.parse(SPEC)
    full = _forecast(spec)
    only = Forecast({"ar": full.shapes["ar"]}, {"ar": 1.0}, full.cost)
    assert unpredictable(spec, only) == (
        "the trace predicts none of the sweep's configs but the baseline"
    )
    assert predicted_path(spec, only, COSTS) is None
    assert unpredictable(spec, full) is None
