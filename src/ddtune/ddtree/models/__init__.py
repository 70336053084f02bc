"""The networks: the Qwen3/Llama target decoder and the DFlash drafter, in plain PyTorch.

    from ddtune.ddtree.models import load_decoder, load_drafter
    target = load_decoder(folder)       # Hugging Face folder: config.json + safetensors

`config` (HF config.json), `rope`, `linear` (prepacked inference weights),
`layers` (norms, MLP, attention projections, fused linears), `model` (the
target), `drafter` (DFlash), `loading` (HF folders in and out), `tokenizer`;
`capture` (which target state a drafter's layer ids name, vLLM's emulated).
The configs are torch-free and imported at once (the server reads the
drafter's block size before it binds); the rest on first use of a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.ddtree.models.config import DrafterConfig, ModelConfig
from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.ddtree.models.drafter import DFlashDrafter
    from ddtune.ddtree.models.loading import load_decoder, load_drafter, save_decoder, save_drafter
    from ddtune.ddtree.models.model import Decoder
    from ddtune.ddtree.models.tokenizer import Tokenizer

__getattr__ = lazy_names(
    __name__,
    {
        "DFlashDrafter": "drafter",
        "Decoder": "model",
        "Tokenizer": "tokenizer",
        **{
            name: "loading"
            for name in ("load_decoder", "load_drafter", "save_decoder", "save_drafter")
        },
    },
)

__all__ = [
    "DFlashDrafter",
    "Decoder",
    "DrafterConfig",
    "ModelConfig",
    "Tokenizer",
    "load_decoder",
    "load_drafter",
    "save_decoder",
    "save_drafter",
]
