"""Batched self-distillation decoding equals one-at-a-time greedy decoding."""

from __future__ import annotations

from pathlib import Path

from ddtune.ddtree.models.loading import load_decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.train.distill import batch_greedy, build_examples, distill_prompts
from ddtune.train.evaluate import greedy_generate


def test_left_padded_batch_matches_single_prompts(tiny_target_dir: Path) -> None:
    model = load_decoder(tiny_target_dir)
    tok = Tokenizer.load(tiny_target_dir)
    prompts = distill_prompts(tok, 6, seed=0, stdlib_share=0.5, max_prompt=40)
    prompts = [p[: 8 + 6 * i] for i, p in enumerate(prompts)]
    assert len({len(p) for p in prompts}) > 1  # padding is really exercised
    batched = batch_greedy(model, prompts, max_new=12, eos=0)
    for prompt, row in zip(prompts, batched, strict=True):
        single = greedy_generate(model, prompt, 12, eos_id=0)
        assert row == single or row == single + [0]


def test_examples_keep_prompt_length_and_order(tiny_target_dir: Path) -> None:
    model = load_decoder(tiny_target_dir)
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    examples = build_examples(model, prompts, max_new=4, eos=0, batch=2)
    assert [e.prompt_len for e in examples] == [3, 2, 4]
    assert [e.ids[: e.prompt_len] for e in examples] == prompts
    assert all(len(e.ids) <= e.prompt_len + 4 for e in examples)


def test_past_eos_rows_have_the_full_length(tiny_target_dir: Path) -> None:
    model = load_decoder(tiny_target_dir)
    prompts = [[5, 6, 7], [8, 9]]
    cut = batch_greedy(model, prompts, max_new=10, eos=0)
    full = batch_greedy(model, prompts, max_new=10, eos=0, stop_at_eos=False)
    assert all(len(row) == 10 for row in full)
    for short, long in zip(cut, full, strict=True):
        assert long[: len(short)] == short  # the same greedy text, just not cut
