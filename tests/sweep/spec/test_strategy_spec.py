"""Spec keys of issue 13 (strategy, race, search, passes per start): values and errors naming the key."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.sweep.plan import STRATEGIES
from ddtune.sweep.plan.strategies.predict import PredictingRace
from ddtune.sweep.store.modes import SweepMode

RACE = """
[sweep]
name = "r"
strategy = "race"
repeats = 8
min_repeats = 2
tolerance = 0.05
max_trials = 60
max_hours = 1.5
objective = "long_context"
baseline = { mode = "ar" }
[space]
budget = [4, 8, 16]
"""
OPTUNA = """
[sweep]
name = "o"
strategy = "optuna"
baseline = { mode = "ar" }
[space]
budget = { low = 2, high = 256, log = true }
topk = { low = 1, high = 8 }
window = ["none", 64]
[optuna]
n_trials = 30
confirm_top = 3
"""


def _error(spec_text, body: str) -> UserError:  # noqa: ANN001
    with pytest.raises(UserError) as info:
        spec_text.parse(body)
    assert "\n" not in str(info.value)
    return info.value


def test_race_keys_are_read(spec_text):
    spec = spec_text.parse(RACE)
    assert (spec.strategy, spec.repeats, spec.min_repeats, spec.tolerance) == ("race", 8, 2, 0.05)
    assert (spec.max_trials, spec.max_hours, spec.objective) == (60, 1.5, "long_context")
    assert len(spec.configs) == 3 and spec.search is None and spec.optuna is None


def test_defaults_keep_the_grid(spec_text):
    spec = spec_text.parse('[sweep]\nname = "g"\n[space]\nbudget = [4, 8]\n')
    assert (spec.strategy, spec.min_repeats, spec.tolerance, spec.passes_per_start) == (
        "grid",
        3,
        0.03,
        1,
    )
    assert spec.objective == "throughput"


def test_optuna_keys_and_space_are_read(spec_text):
    spec = spec_text.parse(OPTUNA)
    assert spec.strategy == "optuna" and spec.configs == []
    assert spec.baseline is not None and spec.search is not None
    assert spec.search.size() == 255 * 8 * 2
    assert (spec.optuna.n_trials, spec.optuna.confirm_top, spec.optuna.seed) == (30, 3, None)
    assert spec.repeats == 10  # a race's default most passes


@pytest.mark.parametrize(
    ("body", "key", "message"),
    [
        (
            RACE.replace('"race"', '"bandit"'),
            "sweep.strategy",
            "'grid', 'race', 'optuna' or 'predict'",
        ),
        (RACE.replace("tolerance = 0.05", "tolerance = 0"), "sweep.tolerance", "greater than 0"),
        (RACE.replace("tolerance = 0.05", "tolerance = -0.1"), "sweep.tolerance", "greater than 0"),
        (
            RACE.replace("min_repeats = 2", "min_repeats = 9"),
            "sweep.min_repeats",
            "above sweep.repeats",
        ),
        (
            RACE.replace("min_repeats = 2", "min_repeats = 1"),
            "sweep.min_repeats",
            "greater than or equal to 2",
        ),
        (RACE.replace("max_hours = 1.5", "max_hours = 0"), "sweep.max_hours", "greater than 0"),
        (RACE.replace('name = "r"', 'name = "r"\norder = "random"'), "sweep.order", "interleaved"),
        (RACE.replace('"long_context"', '"latency"'), "sweep.objective", "throughput"),
        (RACE.replace("max_trials = 60", "max_tirals = 60"), "sweep.max_tirals", "unknown key"),
        (
            RACE.replace('"long_context"', '"speedup"').replace('baseline = { mode = "ar" }\n', ""),
            "sweep.baseline",
            "speedup",
        ),
        (RACE.replace("[4, 8, 16]", "{ low = 4, high = 16 }"), "space.budget", "needs strategy"),
        (RACE + "[optuna]\nn_trials = 5\n", "optuna", 'only read with strategy = "optuna"'),
        (
            '[sweep]\nname = "g"\nmin_repeats = 2\n[space]\nbudget = [4, 8]\n',
            "sweep.min_repeats",
            "only applies",
        ),
        (
            OPTUNA.replace("low = 2, high = 256", "low = 300, high = 256"),
            "space.budget.low",
            "above",
        ),
        (OPTUNA.replace("log = true", "lg = true"), "space.budget.lg", "unknown key"),
        (
            OPTUNA.replace("{ low = 2, high = 256, log = true }", "[4]")
            .replace("{ low = 1, high = 8 }", "[2]")
            .replace('["none", 64]', '["none"]'),
            "space",
            "single point",
        ),
        (OPTUNA + "[[configs]]\nbudget = 4\n", "configs", "searches [space]"),
        (OPTUNA.replace("n_trials = 30", "n_trials = 0"), "optuna.n_trials", "greater than"),
        (OPTUNA.replace("confirm_top = 3", "confirm = 3"), "optuna.confirm", "unknown key"),
        (
            RACE.replace('name = "r"', 'name = "r"\npasses_per_start = 3'),
            "sweep.passes_per_start",
            "must divide sweep.repeats",
        ),
    ],
)
def test_bad_strategy_settings_name_the_key(body: str, key: str, message: str, spec_text):
    error = _error(spec_text, body)
    assert error.key == key
    assert message in str(error)
    assert str(error).startswith("t.toml:")


def test_passes_per_start_must_divide_the_passes(spec_text):
    spec = spec_text.parse(RACE.replace('name = "r"', 'name = "r"\npasses_per_start = 2'))
    assert spec.passes_per_start == 2


PREDICT = """
[sweep]
name = "p"
strategy = "predict"
trace = "traces/p"
baseline = { mode = "ar" }
[space]
budget = [4, 8, 16]
"""


def test_predict_reads_its_trace_relative_to_the_spec(spec_text, tmp_path):
    from ddtune.sweep.plan import parse_spec

    spec = parse_spec(spec_text.toml(PREDICT), base_dir=tmp_path)
    assert spec.strategy == "predict" and STRATEGIES["predict"].races
    assert spec.trace == str(tmp_path / "traces" / "p")
    assert spec.repeats == 10  # a race's most passes


def test_predict_needs_a_trace_and_runs_in_this_process(spec_text):
    error = _error(spec_text, PREDICT.replace('trace = "traces/p"\n', ""))
    assert error.key == "sweep.trace" and "ddtune trace record --spec" in str(error)
    ray = (
        PREDICT
        + '[cluster]\nbackend = "ray"\n[[cluster.slots]]\nname = "a"\nservice = { port = 1 }\n'
    )
    assert _error(spec_text, ray).key == "sweep.strategy"


def test_predict_above_t0_races_and_says_why(spec_text):
    spec = spec_text.parse(PREDICT + "[bench]\ntemperature = 0.7\n")
    assert spec.bench.temperature == 0.7  # a race: the trace cannot predict above T = 0
    assert STRATEGIES[spec.strategy].runs_as(spec, SweepMode(True, "")) is not PredictingRace
