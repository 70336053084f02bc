"""The networks: the Qwen3/Llama target decoder, the DFlash drafter and the EAGLE-3 head.

    from ddtune.ddtree.models import load_decoder, load_drafter
    target = load_decoder(folder)       # Hugging Face folder: config.json + safetensors

`config` (HF config.json), `rope`, `linear` (prepacked inference weights),
`layers` (norms, MLP, attention projections, fused linears), `model` (the
target), `drafter` (DFlash), `eagle3` (an EAGLE-3 head in vLLM's and SGLang's
layout; ddtune trains it, vLLM and SGLang serve it), `loading` (HF folders in
and out), `tokenizer`;
`capture` (which target state a drafter's layer ids name, vLLM's emulated).
The configs are torch-free and imported at once (the server reads the
drafter's block size before it binds); the rest on first use of a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.ddtree.models.config import DrafterConfig, Eagle3Config, ModelConfig
from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.ddtree.models.drafter import DFlashDrafter
    from ddtune.ddtree.models.eagle3 import Eagle3Head
    from ddtune.ddtree.models.loading import (
        load_decoder,
        load_drafter,
        load_eagle3,
        save_decoder,
        save_drafter,
        save_eagle3,
    )
    from ddtune.ddtree.models.model import Decoder
    from ddtune.ddtree.models.tokenizer import Tokenizer

__all__ = [
    "DFlashDrafter",
    "Decoder",
    "DrafterConfig",
    "Eagle3Config",
    "Eagle3Head",
    "ModelConfig",
    "Tokenizer",
    "load_decoder",
    "load_drafter",
    "load_eagle3",
    "save_decoder",
    "save_drafter",
    "save_eagle3",
]

__getattr__ = lazy_names(
    __name__,
    {
        "DFlashDrafter": "drafter",
        "Decoder": "model",
        "Eagle3Head": "eagle3",
        "Tokenizer": "tokenizer",
        **{name: "loading" for name in __all__ if name.startswith(("load_", "save_"))},
    },
)
