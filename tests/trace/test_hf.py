"""A Hugging Face target through transformers traces what ddtune's engine traces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.trace.planning.loading import Loading
from ddtune.trace.predict import Trace
from ddtune.trace.record import OwnTarget, TraceSettings, record_trace
from ddtune.trace.sources import requests_from_prompts

pytest.importorskip("transformers")


@pytest.mark.parametrize("capture", ["post-norm", "pre-norm"])
def test_transformers_and_the_engine_trace_the_same_drafts(tmp_path, capture):
    from ddtune.trace.hf import HfTarget

    target, drafter = write_random_checkpoint(
        tmp_path / "models",
        family="llama",
        seed=3,
        std=0.3,
        vocab_size=40,
        num_layers=3,
        block_size=4,
    )
    config = json.loads((drafter / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [0, 2]  # the last layer: the captures differ
    (drafter / "config.json").write_text(json.dumps(config))
    requests = requests_from_prompts(["hello there", "a tie"], 16, ignore_eos=True)
    settings = TraceSettings((None, 4), (), 4, capture)
    record_trace(OwnTarget(target, drafter), requests, tmp_path / "own", settings)
    side = HfTarget(target, drafter, Loading(device="cpu", dtype="float32"))
    record_trace(side, requests, tmp_path / "hf", settings)
    own, hf = Trace.read(tmp_path / "own"), Trace.read(tmp_path / "hf")
    assert hf.header.backend == "transformers" and own.header.capture == capture
    for a, b in zip(own.data, hf.data, strict=True):
        assert np.array_equal(a.tokens, b.tokens)
        for view in a.views:
            assert np.array_equal(a.views[view]["top_ids"], b.views[view]["top_ids"])
            assert np.abs(a.views[view]["top_lp"] - b.views[view]["top_lp"]).max() < 1e-3


def test_the_two_captures_feed_the_drafter_differently(tmp_path):
    """The pre-norm (vLLM) capture of a last-layer drafter is not the post-norm one."""
    test_transformers_and_the_engine_trace_the_same_drafts(tmp_path / "a", "post-norm")
    test_transformers_and_the_engine_trace_the_same_drafts(tmp_path / "b", "pre-norm")
    post, pre = Trace.read(tmp_path / "a" / "own"), Trace.read(tmp_path / "b" / "own")
    diff = [
        np.abs(x.views[v]["top_lp"] - y.views[v]["top_lp"]).max()
        for x, y in zip(post.data, pre.data, strict=True)
        for v in x.views
    ]
    assert max(diff) > 1e-2
