"""The bundled models (or, before they are shipped, a freshly trained tiny one) load in our
engine and in transformers with equal logits, and the drafter is in the public DFlash format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ddtune.assets import MODELS_DIR
from ddtune.ddtree.models.loading import load_decoder, load_drafter
from ddtune.ddtree.models.tokenizer import Tokenizer

SHIPPED = (MODELS_DIR / "target" / "config.json").is_file()
PROMPT = 'def list_even_sum(xs: list[int]) -> int:\n    """Take xs, keep the even numbers. Return their sum."""\n'


@pytest.fixture(scope="module")
def target_dir(request: pytest.FixtureRequest) -> Path:
    if SHIPPED:
        return MODELS_DIR / "target"
    return request.getfixturevalue("tiny_target_dir")


def test_engine_and_transformers_logits_agree(target_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    ours = load_decoder(target_dir)
    theirs = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    ids = torch.tensor([Tokenizer.load(target_dir).encode(PROMPT)])
    with torch.no_grad():
        a = ours(ids).logits
        b = theirs(ids).logits
    assert a.shape == b.shape and a.shape[1] == ids.shape[1]
    assert (a - b).abs().max().item() < 1e-4


def test_transformers_tokenizer_matches_and_knows_eos(target_dir: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(target_dir))
    assert hf(PROMPT, add_special_tokens=False).input_ids == Tokenizer.load(target_dir).encode(
        PROMPT
    )
    assert (
        hf.eos_token_id
        == json.loads((target_dir / "generation_config.json").read_text())["eos_token_id"]
    )


def test_shipped_drafter_fits_the_target_and_size_budget() -> None:
    assert SHIPPED, "the trained models must be committed under src/ddtune/assets/models"
    target = load_decoder(MODELS_DIR / "target")
    drafter = load_drafter(MODELS_DIR / "drafter")
    drafter.cfg.check_target(target.cfg)
    config = json.loads((MODELS_DIR / "drafter" / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and config["block_size"] >= 2
    assert set(config["dflash_config"]) >= {"target_layer_ids", "mask_token_id"}
    size = sum(p.stat().st_size for p in MODELS_DIR.rglob("*") if p.is_file())
    assert size <= 40 * 2**20


def test_shipped_eagle3_head_fits_the_target_its_budget_and_drafts() -> None:
    """The bundled EAGLE-3 head: vLLM's layout, at most 8 MB, and trained (on two held-out
    prompts its 3-token chains commit well over two tokens a round at T = 0)."""
    from ddtune.assets import default_tasks_file
    from ddtune.ddtree.models.loading import load_eagle3
    from ddtune.train.eagle3_eval import acceptance_by_steps
    from ddtune.train.tasks import read_jsonl

    head_dir = MODELS_DIR / "eagle3"
    head = load_eagle3(head_dir)
    head.cfg.check_target(load_decoder(MODELS_DIR / "target").cfg)
    config = json.loads((head_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert (head_dir / "model.safetensors").stat().st_size <= 8 * 10**6
    prompts = [t["prompt"] for t in read_jsonl(default_tasks_file())[:2]]
    figures = acceptance_by_steps(MODELS_DIR / "target", head_dir, prompts, 32, steps=3)
    assert figures["k3"]["tau"] > 2.5, figures
