"""A Hugging Face target through `transformers`, for tracing models ddtune's engine does not serve.

    side = HfTarget(target_dir, drafter_dir, Loading(devices=("cuda:0", "cuda:1")))
    record_trace(side, requests, out, settings)

The target loads with `AutoModelForCausalLM.from_pretrained` (the real
loading code: any architecture transformers knows) as the serving engine
would (`trace.planning.loading`: the model's own dtype, else bf16; quantized as
transformers loads it; `trust_remote_code` only when asked; over the GPUs
named, CPU offload only when asked), its tokenizer with `AutoTokenizer`. Features are
`hidden_states[i + 1]` for each of the drafter's `target_layer_ids` (after
the final norm for the last layer, as transformers reports it); the pre-norm
capture (vLLM) takes the last decoder layer's own output with a forward hook.
The z-lab DFlash drafter runs as ddtune's `DFlashDrafter` (same weights and
wiring), with the target's embedding and LM head. The greedy decode is a
plain argmax loop over transformers' own KV cache (EOS is a token like any other). See docs/traces.md "Traces".
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.loading import load_drafter
from ddtune.errors import UserError
from ddtune.fingerprint import config_of
from ddtune.trace.planning.loading import Loading, require_transformers

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class HfTarget:
    backend = "transformers"

    def __init__(self, target_dir: Path, drafter_dir: Path, loading: Loading | None = None) -> None:
        loading = loading or Loading()
        gpus = torch.cuda.device_count()
        if loading.device.startswith("cuda") and gpus == 0:
            raise UserError(f"--device {loading.device}: no CUDA device here; use --device cpu")
        placement = loading.placement(gpus)
        require_transformers(placement)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dtype = loading.dtype_for(config_of(target_dir))
        self.target_dir, self.drafter_dir = Path(target_dir), Path(drafter_dir)
        code = {"trust_remote_code": True} if loading.trust_remote_code else {}
        self.model = AutoModelForCausalLM.from_pretrained(
            str(target_dir), dtype=DTYPES.get(dtype, "auto"), **placement, **code
        ).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(str(target_dir), **code)
        self.device = self.model.get_input_embeddings().weight.device
        loaded = self.model.get_input_embeddings().weight.dtype
        self.dtype = str(loaded).removeprefix("torch.")
        self.drafter: DFlashDrafter = load_drafter(drafter_dir, loaded).to(self.device)
        config = self.model.config
        self.num_layers = int(config.num_hidden_layers)
        self.max_context = int(config.max_position_embeddings)
        self.eos_token_ids = _eos_ids(self.model)
        forward = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"  # 5.24 renamed it
        bad = [i for i in self.drafter.cfg.target_layer_ids if not 0 <= i < self.num_layers]
        if bad:
            raise UserError(
                f"{drafter_dir}: target_layer_ids {bad} are outside the target's "
                f"{self.num_layers} layers; is this the drafter of {target_dir}?"
            )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids))

    @torch.inference_mode()
    def greedy(self, prompt: list[int], max_new: int) -> list[int]:
        """Argmax after argmax over transformers' own KV cache, EOS ignored (it is a token
        like any other: the served engine's rounds walk past it too)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        out: list[int] = []
        ids = torch.tensor([prompt], device=self.device)
        while len(out) < max_new:
            logits = self.model(ids, use_cache=True, **{self._cache_arg: cache}).logits
            out.append(int(logits[0, -1].argmax()))
            ids = torch.tensor([[out[-1]]], device=self.device)
        return out

    @torch.inference_mode()
    def features(self, ids: list[int], capture: str) -> tuple[torch.Tensor, torch.Tensor]:
        layer_ids = self.drafter.cfg.target_layer_ids
        last = self.num_layers - 1
        kept: list[torch.Tensor] = []
        hook = None
        if capture == "pre-norm" and last in layer_ids:
            layer = self.model.model.layers[last]
            hook = layer.register_forward_hook(lambda _m, _a, out: kept.append(_first(out)))
        try:
            out = self.model(torch.tensor([ids], device=self.device), output_hidden_states=True)
        finally:
            if hook is not None:
                hook.remove()
        states = [kept[0] if kept and i == last else out.hidden_states[i + 1] for i in layer_ids]
        feats = torch.cat([s.to(self.device) for s in states], dim=-1)
        return feats, out.logits[0].argmax(dim=-1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids.to(self.device))

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        head = self.model.get_output_embeddings()
        return head(hidden.to(head.weight.device))


def _eos_ids(model: Any) -> list[int]:
    value = getattr(model.generation_config, "eos_token_id", None)
    if value is None:
        value = getattr(model.config, "eos_token_id", None)
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, list) else [value])]


def _first(output: Any) -> torch.Tensor:
    """A decoder layer's hidden output: a tensor, or the first item of a tuple."""
    return output[0] if isinstance(output, tuple) else output


__all__ = ["HfTarget"]
