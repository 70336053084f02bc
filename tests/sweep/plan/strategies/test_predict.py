"""Strategy predict without a trace: n-gram spaces are predicted from the baseline's own
T = 0 answers (its token ids), so the spec needs no `[sweep] trace`; other methods still
do, and an engine that sends no token ids is refused before anything stops."""

from __future__ import annotations

import pytest

from ddtune.bench.result import BenchResult
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.records import TrialRecord
from ddtune.report.render.document import Paragraph
from ddtune.sweep.plan import parse_spec, prepare
from ddtune.sweep.plan.strategies.predict import PROBE_TOKENS, PredictingRace
from ddtune.sweep.plan.strategies.predict_path import outputs_path
from ddtune.sweep.plan_view import predicted_sections
from ddtune.sweep.store.db import PlannedTrial, Store
from ddtune.trace.forecast import paths_forecast

NGRAM = """
[sweep]
name = "ng"
strategy = "predict"
baseline = { method = "ar" }
[space]
method = ["ngram"]
[space.ngram]
num_draft_tokens = [2, 4]
prompt_lookup_max = [2, 4]
"""
SERVICE = """
[service]
engine = "{engine}"
command = ["python", "-m", "vllm.entrypoints.openai.api_server", "--port", "{{port}}",
           "{{method_args}}"]
port = 18000
expected_start_s = 60
expected_bench_s = 20
"""


def parse(text: str = NGRAM, engine: str = "vllm"):  # noqa: ANN201
    return parse_spec(text + SERVICE.format(engine=engine), source="t.toml")


def test_an_ngram_space_needs_no_trace_and_its_baseline_measures_what_predicts():
    sweep = prepare(parse(), None)
    strategy = sweep.strategy
    assert isinstance(strategy, PredictingRace) and sweep.mode.restart_bound
    assert strategy.forecast is None and sweep.mode.forecast is None  # it comes with the baseline
    assert "the baseline's T = 0 answers" in sweep.mode.reason
    base = {"is_baseline": 1, "repeat": 1}
    matrix = strategy.bench_for(base, sweep.spec.bench)  # type: ignore[arg-type]
    assert matrix.token_paths and matrix.forward_probes == PROBE_TOKENS
    later = strategy.bench_for({"is_baseline": 0, "repeat": 1}, sweep.spec.bench)  # type: ignore[arg-type]
    assert not later.token_paths and later.forward_probes == ()
    assert strategy.state().next().label == "ar"  # the baseline alone until it predicts


def test_other_methods_still_need_a_trace():
    text = NGRAM.replace('method = ["ngram"]', 'method = ["ngram", "dflash"]')
    text += "[space.dflash]\nblock_size = 8\n"
    with pytest.raises(UserError, match=r"sweep\.trace.*required.*for dflash"):
        parse(text)


def test_an_engine_without_token_ids_is_refused_before_anything_stops():
    with pytest.raises(UserError, match="the sglang engine does not send"):
        parse(engine="sglang")


def _paths() -> list[dict]:
    """A repetitive answer: prompt lookup finds what comes next."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12] * 3
    return [
        {"workload": w, "prompt_ids": prompt, "output_ids": prompt[:16], "max_tokens": 16}
        | {"count": 1, "context": 512}
        for w in ("short", "long")
    ]


def test_the_baseline_record_brings_the_forecast_and_the_probes():
    sweep = prepare(parse(), None)
    strategy = sweep.strategy
    assert isinstance(strategy, PredictingRace)
    record = TrialRecord(
        1,
        "ar",
        DecodeParams("ar", 0, 1, None),
        True,
        1,
        "done",
        metrics={"short_tps": 40.0, "long_tps": 38.0, "throughput_tps": 39.0},
        token_paths=_paths(),
        forward_probes=[{"tokens": n, "seconds": 0.02 + 0.001 * n} for n in (1, 8, 64)],
    )
    result = strategy._result(record, 0.1, True, 60.0)
    assert result.forecast is not None and len(result.probes) == 3
    labels = {c.label() for c, _ in sweep.spec.all_configs()}
    assert set(result.forecast.shapes) == labels  # every n-gram config and the baseline
    again = paths_forecast(_paths(), strategy.params)  # a resumed sweep folds the same
    assert result.forecast.to_json() == again.to_json()
    k4 = next(x for x in labels if "num_draft_tokens=4" in x and "prompt_lookup_max=2" in x)
    shape = result.forecast.shapes[k4]["short"]
    assert shape.mode == "ngram" and shape.acceptance > 2  # the answer repeats the prompt
    assert 1 < shape.verify_tokens <= 5 and shape.tokens_per_round > 1


EAGLE3 = """
[sweep]
name = "e3"
strategy = "predict"
baseline = { method = "ar" }
[space]
method = ["eagle3"]
[space.eagle3]
num_steps = [1, 2, 3]
drafter = ["/heads/eagle3"]
"""


def test_a_chain_space_on_vllm_needs_no_trace_its_largest_steps_predicts_the_rest():
    sweep = prepare(parse(EAGLE3), None)
    strategy = sweep.strategy
    assert isinstance(strategy, PredictingRace) and strategy.forecast is None
    labels = {c.label(): c.params for c, _ in sweep.spec.all_configs()}
    top = next(x for x in labels if "num_steps=3" in x)
    assert set(strategy.anchors.values()) == {top}
    assert any(top in line for line in strategy.pass_words())
    path = outputs_path(sweep.spec, None)
    assert path is not None and [x for x, _ in path.starts][:2] == ["ar", top]
    assert len(path.starts) == 3  # the baseline, the largest K, the predicted winner
    record = TrialRecord(
        2,
        top,
        labels[top],
        False,
        1,
        "done",
        metrics={"short_tps": 60.0, "long_tps": 50.0, "throughput_tps": 55.0}
        | {"short_acceptance_length": 3.2, "long_acceptance_length": 2.8},
        draft_counts={"drafts": 100, "accepted_per_position": [90, 70, 50]}
        | {"workloads": {"long": {"drafts": 40, "accepted_per_position": [30, 24, 18]}}},
    )
    forecast = strategy._result(record, 0.2, True, 60.0).forecast
    assert forecast is not None and set(forecast.shapes) == set(labels) - {"ar"}
    one = next(x for x in labels if "num_steps=1" in x)
    assert 1.0 < forecast.shapes[one]["short"].acceptance < 3.2  # (tau - 1) scaled by 0.9 / 2.1
    assert forecast.shapes[one]["long"].acceptance == pytest.approx(1.75)  # its own: 1 + 30 / 40
    with pytest.raises(UserError, match=r"sweep\.trace.*required.*for eagle3"):
        parse(EAGLE3, engine="sglang")  # SGLang counts no acceptance per draft position


def _finish_baseline(store: Store, row, fresh: bool) -> None:
    """The baseline's bench: its answers as token ids and its timed forwards (its first one)."""
    attempt_id, _ = store.begin_attempt(row["id"])
    timings = {"bench_s": 20.0} | ({"start_to_ready_s": 60.0} if fresh else {"reused_start": 1.0})
    aggregates = {"short_tps": 40.0, "long_tps": 38.0}
    bench = {"aggregates": aggregates, "samples": [], "outputs": []}
    if fresh:
        probes = [{"tokens": n, "seconds": 0.02 + 0.001 * n} for n in PROBE_TOKENS]
        bench |= {"token_paths": _paths(), "forward_probes": probes}
    store.record_result(row["id"], attempt_id, BenchResult.from_dict(bench), timings=timings)


def _opened(store: Store, text: str):  # noqa: ANN202
    spec = parse(text)
    sweep = prepare(spec, store)
    sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, [], None, sweep.mode)
    return sweep.strategy, sweep_id


def test_the_baselines_start_in_an_earlier_sweep_of_the_service_is_not_started_again(tmp_path):
    """A second predict sweep in the store of a first one, over other n-gram configs of the
    same service and bench: the first one's start of the baseline (its answers, its timed
    forwards) counts as the baseline's first start, so its first trial is an n-gram config;
    the report says so. Another bench measures the baseline otherwise: it starts first."""
    store = Store(tmp_path / "store.sqlite")
    first, first_id = _opened(store, NGRAM)
    rows = first.next_batch(store, first_id)
    assert [r["label"] for r in rows] == ["ar"]
    _finish_baseline(store, rows[0], fresh=True)
    second_text = NGRAM.replace('name = "ng"', 'name = "ng2"').replace(
        "[2, 4]\nprompt", "[6]\nprompt"
    )
    second, second_id = _opened(store, second_text)
    assert isinstance(second, PredictingRace)
    rows = second.next_batch(store, second_id)
    assert rows and rows[0]["label"] != "ar" and "num_draft_tokens=6" in rows[0]["label"]
    race = second.state(store, second_id)
    assert race.efforts["ar"].starts == 1 and race.forecast is not None
    assert second.earlier is not None and second.earlier.sweep == "ng"
    context = second.context(store, store.sweep_row("ng2"))
    assert any("was not started first" in note and "sweep ng" in note for note in context.notes)
    assert "ar" not in context.efforts  # no start of its own in this sweep yet
    planned = prepare(parse(second_text.replace('name = "ng2"', 'name = "ng4"')), store)
    said = [
        block.text
        for section in predicted_sections(planned, store, False)
        for block in section.blocks
        if isinstance(block, Paragraph)
    ]
    assert any("the baseline is not started first: its start in sweep ng" in t for t in said)
    other_bench = second_text.replace('name = "ng2"', 'name = "ng3"') + "[bench]\nwarmup = 3\n"
    third, third_id = _opened(store, other_bench)
    assert [r["label"] for r in third.next_batch(store, third_id)] == ["ar"]
    service = SERVICE.format(engine="vllm").replace("port = 18000", 'port = 18000\nmodel = "x"')
    other_model = parse_spec(second_text.replace('"ng2"', '"ng5"') + service, source="t.toml")
    assert prepare(other_model, store).strategy.earlier is None  # another served model


def test_the_reused_start_is_fixed_with_the_sweep_and_its_own_start_is_the_next_ones(tmp_path):
    """The start taken is stored with the new sweep: a resume replays it even after the earlier
    sweep measured the baseline again. The sweep's own first start of the baseline measures
    what a forecast reads (its answers, its forwards), so the next sweep takes that newer one."""
    store = Store(tmp_path / "store.sqlite")
    first, first_id = _opened(store, NGRAM)
    _finish_baseline(store, first.next_batch(store, first_id)[0], fresh=True)
    second_text = NGRAM.replace('name = "ng"', 'name = "ng2"')
    second, second_id = _opened(store, second_text)
    assert isinstance(second, PredictingRace) and second.earlier is not None
    taken = second.earlier
    most = second.settings.most_benches
    own = {"is_baseline": 1, "repeat": most + 1}
    assert second.bench_for(own, second.spec.bench).forward_probes == PROBE_TOKENS  # type: ignore[arg-type]
    assert not second.bench_for({"is_baseline": 1, "repeat": 1}, second.spec.bench).token_paths  # type: ignore[arg-type]
    later = store.add_trials(first_id, [PlannedTrial(9, first.configs[0][0], 9, True)])
    _finish_baseline(store, later[0], fresh=True)  # the first sweep measured the baseline again
    resumed = prepare(parse(second_text), store).strategy
    assert isinstance(resumed, PredictingRace) and resumed.earlier == taken
    third = prepare(parse(NGRAM.replace('name = "ng"', 'name = "ng3"')), store).strategy
    assert isinstance(third, PredictingRace) and third.earlier is not None
    assert third.earlier.benches[0][0].trial_id == later[0]["id"]  # the newest start
