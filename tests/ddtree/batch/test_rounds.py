"""Batched decoding is lossless per request: each request's output in a batch equals its
unbatched `Engine.generate` output, token for token (and its logprobs, prompt logprobs,
stop token, min_tokens and top-k behaviour), whatever else runs beside it."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtune.ddtree.batch.scheduler import BatchRequest, BatchResult, Scheduler, generate_batch
from ddtune.ddtree.testing import logprobs_close
from ddtune.params import DecodeParams, SamplingParams

request_st = st.fixed_dictionaries(
    {
        "arrival": st.integers(0, 6),
        "prompt": st.lists(st.integers(2, 7), min_size=1, max_size=24),
        "mode": st.sampled_from(["ar", "dflash", "ddtree", "ddtree"]),
        "budget": st.integers(0, 40),
        "topk": st.integers(1, 6),
        "window": st.sampled_from([None, 1, 3, 1000]),
        "max_new": st.integers(1, 24),
        "ignore_eos": st.booleans(),
        "min_tokens": st.integers(0, 4),
        "logprobs": st.sampled_from([None, None, 0, 2]),
        "prompt_logprobs": st.sampled_from([None, None, 1]),
        "top_k": st.sampled_from([0, 0, 2]),
    }
)


def make_request(spec: dict, temperature: float = 0.0, seed: int | None = None) -> BatchRequest:
    params = DecodeParams(spec["mode"], spec["budget"], spec["topk"], spec["window"])
    sampling = SamplingParams(
        max_new_tokens=spec["max_new"],
        ignore_eos=spec["ignore_eos"],
        temperature=temperature,
        seed=seed,
        min_tokens=min(spec.get("min_tokens", 0), spec["max_new"]),
        logprobs=spec.get("logprobs"),
        prompt_logprobs=spec.get("prompt_logprobs"),
        top_k=spec.get("top_k", 0),
    )
    return BatchRequest(spec["prompt"], params, sampling)


def assert_same_as_unbatched(engine, request: BatchRequest, got: BatchResult) -> None:  # noqa: ANN001
    ref = engine.generate(request.prompt_ids, request.params, request.sampling)
    assert got.error is None
    assert got.result is not None
    assert got.result.token_ids == ref.token_ids
    assert got.result.finish_reason == ref.finish_reason
    assert got.result.stop_token == ref.stop_token
    for mine, theirs in (
        (got.result.logprobs, ref.logprobs),
        (got.result.prompt_logprobs, ref.prompt_logprobs),
    ):
        assert (mine is None) == (theirs is None)
        assert mine is None or theirs is None or logprobs_close(mine, theirs)
    # Same trees, same acceptance: the batched drafter sees what the unbatched one sees.
    assert got.result.stats.acceptance_lengths == ref.stats.acceptance_lengths


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["qwen3", "llama"]),
    block=st.sampled_from([2, 4, 6]),
    specs=st.lists(request_st, min_size=1, max_size=8),
    max_batch=st.integers(1, 8),
    step_tokens=st.sampled_from([48, 64, 200, 2048]),
)
def test_t0_batched_output_equals_unbatched(engines, family, block, specs, max_batch, step_tokens):  # noqa: ANN001
    engine = engines(family, block)
    requests = [make_request(s) for s in specs]
    results = generate_batch(
        engine,
        [(s["arrival"], r) for s, r in zip(specs, requests, strict=True)],
        max_batch,
        step_tokens,
    )
    for request, got in zip(requests, results, strict=True):
        assert_same_as_unbatched(engine, request, got)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(specs=st.lists(request_st, min_size=2, max_size=6), seed=st.integers(0, 1 << 30))
def test_seeded_sampling_under_batching_equals_unbatched(engines, specs, seed):  # noqa: ANN001
    """T>0: each request draws from its own generator in token order, as unbatched."""
    engine = engines("qwen3", 4)
    requests = [make_request(s, temperature=0.9, seed=seed + i) for i, s in enumerate(specs)]
    results = generate_batch(
        engine, [(s["arrival"], r) for s, r in zip(specs, requests, strict=True)], 4
    )
    for request, got in zip(requests, results, strict=True):
        assert_same_as_unbatched(engine, request, got)


def batch_of(n: int, max_new: int = 20) -> list[BatchRequest]:
    sampling = SamplingParams(max_new_tokens=max_new, ignore_eos=True)
    return [
        BatchRequest([2 + i, 3, 4 + i % 3], DecodeParams("ddtree", 8 + i, 3), sampling)
        for i in range(n)
    ]


def test_a_failing_request_does_not_take_down_its_batch(engines) -> None:  # noqa: ANN001
    engine = engines("qwen3", 4)
    requests = batch_of(4)

    def explode(ids: list[int]) -> bool:
        raise RuntimeError("stop handling broke")

    requests[1].on_tokens = explode
    results = generate_batch(engine, [(0, r) for r in requests], max_batch=4)
    assert isinstance(results[1].error, RuntimeError) and results[1].result is None
    for i in (0, 2, 3):
        assert_same_as_unbatched(engine, requests[i], results[i])
        stats = results[i].result.stats  # type: ignore[union-attr]
        assert 1 < stats.mean_batch_size <= 3  # shared its rounds (b failed after its first)


def test_stop_string_failure_is_per_request(engines, monkeypatch) -> None:  # noqa: ANN001
    """A request whose stop-string handling raises gets the error; the rest finish."""
    from ddtune.ddtree import stops

    original = stops.OutputBuilder._check_stop_strings

    def fragile(self, text: str) -> None:  # noqa: ANN001
        if "boom" in self.stop_strings:
            raise ValueError("stop-string handling failed")
        original(self, text)

    monkeypatch.setattr(stops.OutputBuilder, "_check_stop_strings", fragile)
    requests = batch_of(3)
    requests[0].sampling = requests[0].sampling.replace(stop_strings=("boom",))
    results = generate_batch(engine := engines("qwen3", 4), [(0, r) for r in requests], 3)
    assert isinstance(results[0].error, ValueError)
    for i in (1, 2):
        assert_same_as_unbatched(engine, requests[i], results[i])


def test_cancel_one_request_mid_batch(engines) -> None:  # noqa: ANN001
    engine = engines("qwen3", 4)
    requests = batch_of(3, max_new=30)
    seen: list[int] = []
    requests[2].cancelled = lambda: len(seen) >= 3
    requests[2].on_tokens = lambda ids: seen.extend(ids) or None
    results = generate_batch(engine, [(0, r) for r in requests], max_batch=3)
    assert results[2].result is not None and results[2].result.finish_reason == "cancelled"
    assert 3 <= len(results[2].result.token_ids) < 30
    for i in (0, 1):
        assert_same_as_unbatched(engine, requests[i], results[i])


def test_admission_respects_max_batch_and_the_step_token_budget(engines) -> None:  # noqa: ANN001
    engine = engines("qwen3", 4)
    scheduler = Scheduler(engine, max_batch=3, max_step_tokens=30)
    rows: list[int] = []
    scheduler.on_round = lambda report: rows.append(report.rows)
    b9 = DecodeParams("ddtree", 9, 2)  # 10 tokens per round: three fit 30, a fourth not
    requests = batch_of(4)
    for request in requests[:3]:
        assert scheduler.can_admit(b9)
        scheduler.add(BatchRequest(request.prompt_ids, b9, request.sampling))
    assert not scheduler.can_admit(DecodeParams("ar"))  # max_batch reached
    scheduler.step()
    assert scheduler.size == 3 and scheduler.decoding == 3
    small = Scheduler(engine, max_batch=8, max_step_tokens=25)
    small.add(BatchRequest([2], b9, requests[0].sampling))
    small.add(BatchRequest([3], b9, requests[0].sampling))
    assert not small.can_admit(b9)  # 10 + 10 + 10 > 25
    assert small.can_admit(DecodeParams("ar"))
    while scheduler.busy:
        scheduler.step()
    assert max(rows) == 3


def test_long_prompts_prefill_in_chunks_within_the_budget(engines) -> None:  # noqa: ANN001
    engine = engines("qwen3", 4)
    prompt = [2 + i % 6 for i in range(90)]
    sampling = SamplingParams(max_new_tokens=5, logprobs=1, prompt_logprobs=2)
    request = BatchRequest(prompt, DecodeParams("ddtree", 6, 2), sampling)
    scheduler = Scheduler(engine, max_batch=2, max_step_tokens=16)
    done: list[BatchResult] = []
    request.on_done = done.append
    scheduler.add(request)
    steps = 0
    while scheduler.busy:
        scheduler.step()
        steps += 1
    assert steps >= 90 // 16  # at most 16 prompt tokens per step
    assert_same_as_unbatched(engine, request, done[0])  # prompt logprobs across chunks too
    assert done[0].result is not None and len(done[0].result.prompt_logprobs or []) == 89


def test_bad_settings_are_clear_errors(engines) -> None:  # noqa: ANN001
    import pytest

    from ddtune.errors import UserError

    engine = engines("qwen3", 4)
    with pytest.raises(UserError, match="max_batch must be at least 1"):
        Scheduler(engine, max_batch=0)
    scheduler = Scheduler(engine, max_batch=2, max_step_tokens=16)
    with pytest.raises(UserError, match="smaller than one request's round of 33 tokens") as err:
        scheduler.check(DecodeParams("ddtree", 32, 4))
    assert err.value.key == "max_step_tokens"
    with pytest.raises(UserError, match="prompt is empty"):
        scheduler.add(BatchRequest([], DecodeParams("ar"), SamplingParams()))
    assert not scheduler.busy


def test_trees_are_shortened_at_the_end_of_the_context(tmp_path) -> None:  # noqa: ANN001
    from ddtune.ddtree.engine import Engine
    from ddtune.ddtree.testing import write_random_checkpoint

    target, drafter = write_random_checkpoint(
        tmp_path, seed=4, std=0.3, vocab_size=8, num_layers=2, max_position_embeddings=40
    )
    engine = Engine.load(target, drafter, dtype=torch.float64)
    sampling = SamplingParams(max_new_tokens=64, ignore_eos=True)
    requests = [
        BatchRequest([2 + i] * (20 + 6 * i), DecodeParams("ddtree", 30, 4), sampling)
        for i in range(3)
    ]
    results = generate_batch(engine, [(0, r) for r in requests], max_batch=3)
    for request, got in zip(requests, results, strict=True):
        assert_same_as_unbatched(engine, request, got)
        assert got.result is not None and got.result.finish_reason == "length"
        # the cache holds 40 positions; the last emitted token never enters it
        assert len(request.prompt_ids) + len(got.result.token_ids) <= 40 + 1
        assert max(got.result.stats.tree_sizes[-2:]) < 30  # shortened near the end


def test_a_target_without_drafter_batches_ar(tmp_path) -> None:  # noqa: ANN001
    from ddtune.ddtree.engine import Engine
    from ddtune.ddtree.testing import write_random_checkpoint

    target, _ = write_random_checkpoint(tmp_path, seed=2, std=0.3, vocab_size=8, num_layers=2)
    engine = Engine.load(target, dtype=torch.float64)
    sampling = SamplingParams(max_new_tokens=12, ignore_eos=True)
    requests = [BatchRequest([2 + i] * (1 + 3 * i), DecodeParams("ar"), sampling) for i in range(4)]
    results = generate_batch(engine, [(i, r) for i, r in enumerate(requests)], max_batch=3)
    for request, got in zip(requests, results, strict=True):
        assert_same_as_unbatched(engine, request, got)


def test_slots_grow_to_the_longest_request(engines) -> None:  # noqa: ANN001
    engine = engines("qwen3", 4)
    scheduler = Scheduler(engine, max_batch=2)
    before = scheduler.decoder.cache.capacity
    long = SamplingParams(max_new_tokens=before + 40, ignore_eos=True)
    request = BatchRequest([3, 4], DecodeParams("ddtree", 5, 2), long)
    done: list[BatchResult] = []
    request.on_done = done.append
    scheduler.add(request)
    assert scheduler.decoder.cache.capacity >= before + 40
    while scheduler.busy:
        scheduler.step()
    assert_same_as_unbatched(engine, request, done[0])


def test_both_walks_give_the_unbatched_output(engines, monkeypatch) -> None:  # noqa: ANN001
    """One LM-head matmul over all nodes, or one per depth: the same choices (T=0 and T>0)."""
    from ddtune.ddtree import walk

    engine = engines("llama", 6)
    specs = [
        {"prompt": [2 + i, 5, 3 + i % 4] * (1 + i), "mode": mode, "budget": 6 + 5 * i, "topk": 3}
        for i, mode in enumerate(["ddtree", "dflash", "ar", "ddtree", "ddtree"])
    ]
    for limit in (0, 10**6):
        monkeypatch.setattr(walk, "NODES_PER_ROW", limit)
        requests = [
            make_request(
                {**s, "window": None, "max_new": 20, "ignore_eos": True},
                temperature=0.8 if i % 2 else 0.0,
                seed=i,
            )
            for i, s in enumerate(specs)
        ]
        results = generate_batch(engine, [(0, r) for r in requests], max_batch=5)
        for request, got in zip(requests, results, strict=True):
            assert_same_as_unbatched(engine, request, got)
