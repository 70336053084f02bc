"""`ddtune serve --schedule`: each request runs the config of the range holding the requests in
flight when it is admitted, and switching is lossless: at T = 0 every request's output equals
plain autoregressive decoding, whatever the schedule and the mix of requests (a property test
on a tiny random float64 checkpoint)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtune.engines.schedule import Schedule, Tier
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams
from ddtune.server.config import ServeConfig
from ddtune.server.metrics import ServerMetrics
from ddtune.server.state import ServerState
from ddtune.server.worker import GenerationWorker, Job, JobOutcome

AR = DecodeParams("ar")
params_st = st.one_of(
    st.just(AR),
    st.builds(DecodeParams, st.just("dflash"), st.just(16), st.just(4), st.sampled_from([None, 2])),
    st.builds(
        DecodeParams, st.just("ddtree"), st.integers(0, 24), st.integers(1, 5), st.just(None)
    ),
)


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    limits = sorted(set(draw(st.lists(st.integers(1, 6), max_size=3))))
    tiers = [Tier(n, draw(params_st)) for n in limits]
    return Schedule((*tiers, Tier(None, draw(params_st))))


request_st = st.fixed_dictionaries(
    {
        "prompt": st.lists(st.integers(2, 7), min_size=1, max_size=12),
        "max_new": st.integers(1, 16),
        "pause_ms": st.sampled_from([0, 0, 0, 5]),
    }
)


def run_jobs(engine, schedule: Schedule, specs: list[dict], max_batch: int) -> list[JobOutcome]:  # noqa: ANN001
    pick = lambda n: (schedule.pick(n).params, 0)  # noqa: E731 - what ServerState.for_requests does
    worker = GenerationWorker(engine, pick, ServerMetrics(), 64, max_batch, 2048)
    worker.start()
    outcomes: dict[int, JobOutcome] = {}
    done = threading.Condition()

    def finish(i: int, outcome: JobOutcome) -> None:
        with done:
            outcomes[i] = outcome
            done.notify_all()

    try:
        for i, spec in enumerate(specs):
            sampling = SamplingParams(max_new_tokens=spec["max_new"], ignore_eos=True)
            worker.submit(Job(spec["prompt"], sampling, lambda o, i=i: finish(i, o)))
            time.sleep(spec["pause_ms"] / 1000)
        with done:
            assert done.wait_for(lambda: len(outcomes) == len(specs), timeout=120)
    finally:
        worker.stop()
    return [outcomes[i] for i in range(len(specs))]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    schedule=schedules(),
    specs=st.lists(request_st, min_size=1, max_size=8),
    max_batch=st.integers(1, 6),
)
def test_t0_output_under_any_schedule_equals_autoregressive(
    random_engines, schedule, specs, max_batch
) -> None:  # noqa: ANN001
    engine = random_engines("qwen3", 4)[2]
    outcomes = run_jobs(engine, schedule, specs, max_batch)
    for spec, outcome in zip(specs, outcomes, strict=True):
        sampling = SamplingParams(max_new_tokens=spec["max_new"], ignore_eos=True)
        reference = engine.generate(spec["prompt"], AR, sampling)
        assert outcome.error is None and outcome.result is not None
        assert outcome.result.token_ids == reference.token_ids
        assert outcome.params in {t.params for t in schedule.tiers}


def test_the_config_follows_the_requests_in_flight(random_engines) -> None:  # noqa: ANN001
    engine = random_engines("qwen3", 4)[2]
    alone, crowd = DecodeParams("ddtree", 12, 3), DecodeParams("ar")
    schedule = Schedule((Tier(1, alone), Tier(None, crowd)))
    first = run_jobs(engine, schedule, [{"prompt": [2, 3], "max_new": 4, "pause_ms": 0}], 4)
    assert first[0].params == alone
    burst = [{"prompt": [2, 3 + i % 4], "max_new": 12, "pause_ms": 0} for i in range(6)]
    used = [o.params for o in run_jobs(engine, schedule, burst, 4)]
    assert used.count(crowd) >= 4 and set(used) <= {alone, crowd}


def test_serve_reads_a_schedule_file_checks_every_tier_and_a_post_sets_one_config(
    random_engines, tmp_path
) -> None:  # noqa: ANN001
    target, drafter, _ = random_engines("qwen3", 4)
    wire = Schedule((Tier(2, DecodeParams("ddtree", 8, 2)), Tier(None, AR))).to_wire()
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"report": {"schedule": wire}}))
    state = ServerState(ServeConfig(target=target, drafter=drafter, schedule=path))
    assert state.for_requests(1)[0] == DecodeParams("ddtree", 8, 2)
    assert state.for_requests(3)[0] == AR and state.current()[0] == DecodeParams("ddtree", 8, 2)
    assert state.config_dict()["schedule"] == wire
    state.reconfigure({"mode": "dflash"})
    assert state.schedule is None and state.for_requests(9)[0].mode == "dflash"
    too_big = Schedule((Tier(2, AR), Tier(None, DecodeParams("ddtree", 100, 2)))).to_wire()
    path.write_text(json.dumps(too_big))  # the open-ended tier's round exceeds the step budget
    with pytest.raises(UserError, match="max_step_tokens|step"):
        config = ServeConfig(target=target, drafter=drafter, schedule=path, max_step_tokens=64)
        ServerState(config)
    path.write_text(json.dumps([{"max_concurrency": 3, "config": {"mode": "ar"}}]))
    with pytest.raises(UserError, match="open-ended"):
        ServerState(ServeConfig(target=target, drafter=drafter, schedule=path))
