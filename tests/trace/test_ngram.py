"""Prompt-lookup prediction: vLLM's proposal rule and its counters, from a greedy path.

The rule is checked against vLLM's own function in
tests/integration/test_vllm_ngram_predict.py (slow); here, by hand-made cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddtune.cli import main
from ddtune.errors import UserError
from ddtune.trace.ngram import GreedyPath, NgramRule, predict_ngram, propose, replay_ngram


def rule(low=1, high=3, k=3, length=1000):
    return NgramRule(low, high, k, length)


@pytest.mark.parametrize(
    "tokens, r, want",
    [
        ([1, 2, 3, 9, 1, 2, 3], rule(), [9, 1, 2]),  # the 3-gram 1 2 3 matches at 0
        ([1, 2, 3, 7, 2, 3, 8, 1, 2, 3], rule(k=2), [7, 2]),  # longest (3) beats "2 3" at 4
        ([5, 3, 6, 3, 4, 3], rule(), [6, 3, 4]),  # ties: the earliest occurrence
        ([1, 2, 1, 2], rule(k=5), [1, 2]),  # the context ends first
        ([1, 2, 3, 4], rule(), []),  # no match
        ([1, 2, 9, 1, 2], rule(low=3, high=3), []),  # only a 2-gram: below --min
        ([1, 1], rule(), [1]),  # an overlapping match
        ([1, 2, 1, 2], rule(length=5), [1]),  # no draft past the model's length
        ([1, 2, 1, 2], rule(length=4), []),
        ([7], rule(), []),
    ],
)
def test_propose_follows_vllms_rule(tokens, r, want):
    assert propose(np.array(tokens), r).tolist() == want


def test_replay_counts_drafts_as_vllm_does():
    # prompt 1 2 3 4, greedy path 1 2 3 4 1 2 ...: every step after the first proposes
    prompt = [1, 2, 3, 4]
    generated = [1, 2, 3, 4, 1, 2, 3, 4, 5, 6]
    tokens = np.array(prompt + generated)
    counts = replay_ngram(tokens, 4, finish=8, max_tokens=8, rule=rule(low=1, high=2, k=3))
    # step 1: context ..4 1 -> "4 1"? no; "1" at 0 -> draft 2 3 4, all accepted (+1) -> 5 made
    # step 2: context ..1 2 3 4 1 -> "4 1" at 3 -> draft 2 3 4 accepted -> 9 made (>= 8)
    assert (counts.drafts, counts.accepted, counts.steps) == (2, 6, 2)
    assert counts.tau == pytest.approx(4.0)
    assert counts.tokens == 7 and counts.tokens_per_step == pytest.approx(3.5)


def test_a_last_round_past_max_tokens_counts_whole_only_with_the_lookahead():
    """vLLM counts the last round's accepted drafts whole, past max_tokens: a path cut at
    max_tokens undercounts them (why a bench records its paths 16 tokens longer)."""
    prompt, generated = [1, 2, 3, 4], [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    r = rule(low=1, high=2, k=3)
    cut = replay_ngram(np.array(prompt + generated[:6]), 4, finish=6, max_tokens=6, rule=r)
    ahead = replay_ngram(np.array(prompt + generated), 4, finish=10, max_tokens=6, rule=r)
    # step 2 drafts 2 3 4 from 5 made: the cut path knows only "2", the longer one all three
    assert (cut.accepted, ahead.accepted) == (4, 6) and cut.drafts == ahead.drafts == 2


def test_steps_without_a_proposal_are_not_drafts():
    tokens = np.array([1, 2, 3, 4, 5, 6, 7])  # nothing repeats
    counts = replay_ngram(tokens, 2, finish=5, max_tokens=5, rule=rule())
    assert counts.drafts == 0 and counts.tau is None and counts.steps == 4


def test_a_rejected_draft_counts_zero_accepted():
    tokens = np.array([1, 2, 1, 3, 3, 3])  # after "1 2 1": proposes 2, the path says 3
    counts = replay_ngram(tokens, 2, finish=3, max_tokens=3, rule=rule(k=1))
    assert (counts.drafts, counts.accepted, counts.steps) == (1, 0, 2)


def test_counts_pool_by_workload_and_count():
    path = GreedyPath(np.array([1, 2, 1, 2, 1, 2, 1, 2]), 2, 6, 6, count=3, workload="short")
    one = replay_ngram(path.tokens, 2, 6, 6, rule())
    pooled = predict_ngram([path], rule())
    assert pooled["all"].drafts == 3 * one.drafts == pooled["short"].drafts


def test_bad_settings_are_user_errors():
    with pytest.raises(UserError, match="--min <= --max"):
        NgramRule(3, 2, 4, 100)
    with pytest.raises(UserError, match="at least 1"):
        NgramRule(1, 2, 0, 100)


def test_cli_predicts_ngram_from_a_recorded_trace(tmp_path, capsys):
    from ddtune.ddtree.testing import write_random_checkpoint

    target, drafter = write_random_checkpoint(tmp_path, seed=2, std=0.3, vocab_size=12)
    out = tmp_path / "trace"
    argv = ["trace", "record", "--target", str(target), "--drafter", str(drafter)]
    assert main([*argv, "--out", str(out), "--prompt", "eat a toe", "--max-tokens", "20"]) == 0
    capsys.readouterr()
    ngram = ["trace", "predict", str(out), "--mode", "ngram", "--min", "1", "--max", "2"]
    assert main([*ngram, "--k", "3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["num_speculative_tokens"] == 3 and got["all"]["steps"] >= 1
    assert main([*ngram, "--k", "3"]) == 0
    assert "as vLLM counts it" in capsys.readouterr().out
    assert main([*ngram, "--k", "0"]) == 2


def test_stored_outputs_give_the_paths_their_tokens_give(tmp_path):
    """`--store`: a sweep's baseline texts, re-encoded with the target's tokenizer."""
    from ddtune.ddtree.testing import char_tokenizer
    from ddtune.trace.ngram import paths_of_texts
    from ddtune.trace.requests import TraceRequest

    tokenizer = tmp_path / "tokenizer.json"
    char_tokenizer(30).save(str(tokenizer))
    request = TraceRequest("short", "eat a toe", 12, count=2, continuation="eat a toe eat")
    (path,) = paths_of_texts(tokenizer, [request])
    assert path.prompt_len == 9 and path.finish == 13 and path.count == 2
    assert path.tokens[:9].tolist() == path.tokens[9:18].tolist()  # the output repeats the prompt
    counts = predict_ngram([path], rule(low=2, high=4, k=4))["all"]
    assert counts.drafts >= 1 and counts.accepted >= 4
    with pytest.raises(UserError, match="--tokenizer FILE"):
        paths_of_texts(tmp_path / "absent.json", [request])


def test_ngram_needs_a_trace_or_a_store(capsys):
    assert main(["trace", "predict", "--mode", "ngram"]) == 2
    assert "give a trace folder or --store S" in capsys.readouterr().err
    assert main(["trace", "predict", "--mode", "ddtree"]) == 2
    assert "give the trace folder" in capsys.readouterr().err


def test_a_bench_s_token_paths_forecast_every_ngram_config_exactly():
    """`paths_forecast`: n-gram configs from the recorded ids (vLLM's defaults where a knob is
    unset), plain decoding one token a round, other methods left to race unpredicted."""
    from ddtune.params import DecodeParams
    from ddtune.trace.forecast import paths_forecast
    from ddtune.trace.ngram import NgramRule, ngram_rule, paths_of_bench, predict_ngram

    prompt = [3, 1, 4, 1, 5, 9, 2, 6] * 4
    token_paths = [
        {"workload": "short", "prompt_ids": prompt, "output_ids": prompt[:20], "max_tokens": 20}
        | {"count": 2, "context": 256}
    ]
    ngram = DecodeParams("ar", 0, 1, None, method="ngram", method_knobs=(("num_draft_tokens", 3),))
    both = DecodeParams(
        "ar",
        0,
        1,
        None,
        method="ngram",
        method_knobs=(("num_draft_tokens", 3), ("prompt_lookup_max", 2)),
    )
    assert ngram_rule(ngram, 256) == NgramRule(5, 5, 3, 256)  # vLLM: both lengths 5
    assert ngram_rule(both, 256) == NgramRule(2, 2, 3, 256)  # one given: the other equals it
    dflash = DecodeParams("dflash", 0, 1, None)
    configs = {"ar": DecodeParams("ar", 0, 1, None), "ng": ngram, "ng2": both, "df": dflash}
    forecast = paths_forecast(token_paths, configs)
    assert set(forecast.shapes) == {"ar", "ng", "ng2"}  # dflash needs a trace
    counts = predict_ngram(paths_of_bench(token_paths), NgramRule(2, 2, 3, 256))["short"]
    shape = forecast.shapes["ng2"]["short"]
    assert shape.acceptance == counts.tau and shape.tokens_per_round == counts.tokens_per_step
    assert shape.verify_tokens == 1 + counts.drafted_tokens / counts.steps
    assert counts.steps and counts.tau is not None and counts.tau > 2  # the answer repeats
    assert forecast.shapes["ar"]["short"].tokens_per_round == 1.0


def test_the_pooled_acceptance_counts_every_draft_as_vllms_counters_do():
    """Over two workloads with different numbers of drafts, the forecast's τ for all requests
    is 1 + accepted / drafts over both (what the service's counters measure), not the mean of
    the workloads' τ (a workload with one lucky draft would weigh as much as one with many)."""
    from ddtune.params import DecodeParams
    from ddtune.trace.forecast import paths_forecast
    from ddtune.trace.ngram import NgramRule, paths_of_bench, predict_ngram

    rich = [3, 1, 4, 1, 5, 9, 2, 6] * 4  # repeats: many drafts
    poor = [*range(10, 40), 10, 11]  # one repeat at the end: one draft, one token of it kept
    token_paths = [
        {"workload": "short", "prompt_ids": rich, "output_ids": rich[:20], "max_tokens": 20},
        {"workload": "long", "prompt_ids": poor, "output_ids": [12, 99, 98, 97], "max_tokens": 4},
    ]
    knobs = (("num_draft_tokens", 3), ("prompt_lookup_max", 2))
    ngram = DecodeParams("ar", 0, 1, None, method="ngram", method_knobs=knobs)
    forecast = paths_forecast([p | {"context": 256} for p in token_paths], {"ng": ngram})
    counts = predict_ngram(paths_of_bench(token_paths), NgramRule(2, 2, 3, 256))
    assert counts["short"].drafts != counts["long"].drafts
    by = [s.acceptance for s in forecast.shapes["ng"].values()]
    assert forecast.acceptance["ng"] == counts["all"].tau
    assert forecast.acceptance["ng"] != sum(by) / len(by)  # type: ignore[arg-type]
