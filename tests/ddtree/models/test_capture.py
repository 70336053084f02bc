"""The engines' conventions for a drafter's target features: ddtune's last layer is after the
final norm, vLLM's (emulated by `residual_capture`) before it; every other layer is the same."""

from __future__ import annotations

import torch

from ddtune.ddtree.models.capture import reads_last_layer, residual_capture
from ddtune.ddtree.models.loading import load_decoder
from ddtune.ddtree.testing import write_random_checkpoint


def test_reads_last_layer():
    assert reads_last_layer([1, 3, 5], 6)  # the bundled drafter on its 6-layer target
    assert not reads_last_layer([1, 2, 3], 6)  # z-lab's recipe: ids in [1, layers - 3]
    assert not reads_last_layer([5], 8)


def test_residual_capture_reports_the_last_layer_before_the_final_norm(tmp_path):
    target_dir, _ = write_random_checkpoint(tmp_path, seed=4, num_layers=3)
    model = load_decoder(target_dir)
    ids = torch.randint(
        0, model.cfg.vocab_size, (1, 12), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        ours = model(ids, hidden_layer_ids=[0, 2])
        with residual_capture(model):
            vllm = model(ids, hidden_layer_ids=[0, 2])
        after = model(ids, hidden_layer_ids=[0, 2])
        renormed = model.model.norm(vllm.hidden[1])
    assert torch.equal(vllm.logits, ours.logits)  # only the features change
    assert torch.equal(vllm.hidden[0], ours.hidden[0])  # a layer before the last: the same
    assert not torch.allclose(vllm.hidden[1], ours.hidden[1], atol=1e-3)
    assert torch.allclose(renormed, ours.hidden[1], atol=1e-5)  # ours = norm(theirs)
    assert torch.equal(after.hidden[1], ours.hidden[1])  # the hooks are gone afterwards
