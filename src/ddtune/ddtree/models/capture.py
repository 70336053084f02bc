"""Which target hidden state a DFlash drafter's `target_layer_ids` name, by serving engine.

A DFlash checkpoint lists `dflash_config.target_layer_ids`: id i is "the output
of decoder layer i". The engines agree on what that is for every layer but the
last one:

- ddtune (`Decoder`), Hugging Face `hidden_states[i + 1]` and z-lab's reference
  code: for the last layer, its output AFTER the model's final norm (Hugging
  Face reports the last hidden state normed).
- vLLM 0.32 (`_maybe_add_hidden_state(aux, idx + 1, hidden, residual)` after each
  layer): the residual stream, i.e. for the last layer its output BEFORE the
  final norm. (SGLang 0.5.23 captures "before layer i + 1" inside its layer
  loop, which has no such point for the last layer; read from its source, not
  run: its DFLASH needs a GPU.)

z-lab's own recipe picks ids in [1, num_layers - 3], where the two agree; a
drafter that reads the last layer (ddtune's bundled one: [1, 3, 5] of 6) gets
different features under vLLM than it was trained on. `reads_last_layer`
says whether that applies; `residual_capture(target)` makes a `Decoder` report
the last layer the way vLLM does, so ddtune's engine can reproduce what vLLM's
drafting sees (benchmarks/dflash_vllm_gap.py, docs/engines.md "vLLM DFlash").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ddtune.ddtree.models.model import Decoder


def reads_last_layer(target_layer_ids: Sequence[int], num_target_layers: int) -> bool:
    """Whether a drafter reads the target's last layer, where the engines' conventions differ."""
    return num_target_layers - 1 in {int(i) for i in target_layer_ids}


@contextlib.contextmanager
def residual_capture(target: Decoder) -> Iterator[None]:
    """Inside: `target(..., hidden_layer_ids=[..., last])` gives the last layer pre-norm (vLLM).

    A forward hook on the last decoder layer keeps its output (the residual
    stream); one on the decoder puts it where ddtune reports the post-norm
    state. Logits and every other layer are unchanged. Not thread-safe: for
    one engine used by one thread (an experiment, not serving).
    """
    last = target.cfg.num_hidden_layers - 1
    kept: list[torch.Tensor] = []

    def keep(_module: Any, _args: Any, output: torch.Tensor) -> None:
        kept[:] = [output]

    def swap(_module: Any, _args: Any, kwargs: dict[str, Any], output: Any) -> Any:
        for slot, layer_id in enumerate(kwargs.get("hidden_layer_ids") or ()):
            if int(layer_id) == last:
                output.hidden[slot] = kept[0]
        return output

    hooks = [
        target.model.layers[last].register_forward_hook(keep),
        target.register_forward_hook(swap, with_kwargs=True),
    ]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


__all__ = ["reads_last_layer", "residual_capture"]
