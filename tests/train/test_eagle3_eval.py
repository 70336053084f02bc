"""Acceptance of an EAGLE-3 head from the greedy path: teacher-forced chains equal free
drafting, rounds counted as vLLM's counters count them, tau per K over prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ddtune.ddtree.models.eagle3 import Eagle3Head
from ddtune.ddtree.models.loading import load_eagle3
from ddtune.ddtree.models.model import Decoder
from ddtune.engines.vllm import round_counts
from ddtune.train.configs import Eagle3TrainConfig
from ddtune.train.distill import batch_greedy
from ddtune.train.eagle3 import load_frozen, target_features, train_eagle3
from ddtune.train.eagle3_eval import acceptance_by_steps, chain_matches, rounds


def test_rounds_follow_the_anchor_and_count_like_vllm() -> None:
    matches = [0, 0, 3, 1, 0, 2, 5, 5, 5, 5, 5, 5, 5, 5]
    # K = 2, prompt of 3 (anchor 2), 6 tokens: the prefill gives 1, anchor 2 accepts 2
    # (4 made, anchor 5), anchor 5 accepts 2 (7 made >= 6: the last round counts whole)
    r = rounds(matches, prompt_len=3, max_tokens=6, k=2)
    assert (r.drafts, r.accepted, r.per_position) == (2, 4, [2, 2])
    r = rounds(matches, prompt_len=3, max_tokens=8, k=3)
    # anchor 2: 3 (made 5, anchor 6), anchor 6: 3 (made 9)
    assert (r.drafts, r.accepted, r.per_position) == (2, 6, [2, 2, 2])
    r = rounds(matches, prompt_len=2, max_tokens=4, k=4)
    # anchor 1: 0 (made 2, anchor 2), anchor 2: 3 (made 6)
    assert (r.drafts, r.accepted, r.per_position) == (2, 3, [1, 1, 1, 0])


def test_rounds_agree_with_vllms_counter_convention() -> None:
    matches = [2, 0, 1, 4, 4, 0, 3, 1, 0, 0, 2, 4, 4, 4, 4, 4, 4, 4]
    for k in (1, 2, 4):
        r = rounds(matches, prompt_len=1, max_tokens=12, k=k)
        lengths, anchor = [], 0
        while anchor < len(matches) - 5:
            a = min(matches[anchor], k)
            lengths.append(a + 1)
            anchor += a + 1
        assert round_counts(lengths, 12) == (r.accepted, r.drafts)


@torch.no_grad()
def free_chain(head: Eagle3Head, target: Decoder, ids: list[int], t: int, steps: int) -> int:
    """Reference: draft from anchor t feeding the head its OWN tokens (no teacher), then
    count the leading drafts equal to the greedy path."""
    tokens = torch.tensor([ids])
    features = target_features(target, tokens, head.cfg.aux_layer_ids)
    length = len(ids)
    shifted = torch.cat([tokens[:, 1:], torch.zeros(1, 1, dtype=torch.long)], dim=1)
    rope = head.rope(head.inv_freq, torch.arange(length)[None], features.dtype)
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None]
    out, (k0, v0) = head.step(target.embed(shifted), head.fc(features), rope, [], causal)
    past, hidden = [(k0[:, :, : t + 1], v0[:, :, : t + 1])], out[:, t : t + 1]
    drafted = [int(head.target_ids(head.logits(out[0, t]).argmax()))]
    for k in range(1, steps):
        rope = head.rope(head.inv_freq, torch.tensor([[t + k]]), features.dtype)
        hidden, kv = head.step(
            target.embed(torch.tensor([[drafted[-1]]])), hidden, rope, past, None
        )
        past.append(kv)
        drafted.append(int(head.target_ids(head.logits(hidden[0, 0]).argmax())))
    leading = 0
    for k, token in enumerate(drafted):
        if t + 2 + k >= length or token != ids[t + 2 + k]:
            break
        leading += 1
    return leading


@pytest.fixture(scope="module")
def tiny_head(tiny_target_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eagle3")
    cfg = Eagle3TrainConfig(
        str(tiny_target_dir),
        str(root / "head"),
        str(root / "ckpt"),
        draft_vocab=300,
        intermediate_size=64,
        ttt_steps=3,
        prompts=16,
        gen_tokens=24,
        batch_size=4,
        steps=60,
        lr=5e-3,
        warmup=2,
        threads=1,
    )
    train_eagle3(cfg)
    return root / "head"


def test_teacher_forced_chains_equal_free_drafting(tiny_target_dir: Path, tiny_head: Path) -> None:
    target, tokenizer = load_frozen(tiny_target_dir)
    head = load_eagle3(tiny_head)
    prompt = tokenizer.encode("def f(x):\n")
    (generated,) = batch_greedy(target, [prompt], 30, eos=0, stop_at_eos=False)
    ids = prompt + generated
    matches = chain_matches(head, target, ids, steps=3)
    assert len(matches) == len(ids) and all(0 <= m <= 3 for m in matches)
    assert sum(matches) > 0  # the head drafts some of the path right: the check has teeth
    for t in range(len(prompt) - 1, len(ids) - 2):
        assert matches[t] == free_chain(head, target, ids, t, 3), t


def test_tau_per_k_over_prompts(tiny_target_dir: Path, tiny_head: Path) -> None:
    figures = acceptance_by_steps(
        tiny_target_dir, tiny_head, ["def f(x):\n", "x = [1, 2"], max_tokens=16, steps=3
    )
    assert list(figures) == ["k1", "k2", "k3"]
    for k, row in enumerate(figures.values(), start=1):
        assert 1.0 <= row["tau"] <= 1 + k and row["drafts"] >= 2 * 15 / (k + 1)
        assert len(row["accepted_per_position"]) == k
        assert row["tau"] == pytest.approx(1 + sum(row["accepted_per_position"]) / row["drafts"])
