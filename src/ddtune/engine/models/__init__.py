"""The networks: the Qwen3/Llama target decoder and the DFlash drafter, in plain PyTorch.

    from ddtune.engine.models import load_decoder, load_drafter
    target = load_decoder(folder)       # Hugging Face folder: config.json + safetensors

`config` (HF config.json), `rope`, `linear` (prepacked inference weights),
`layers` (norms, MLP, attention projections, fused linears), `model` (the
target), `drafter` (DFlash), `loading` (HF folders in and out), `tokenizer`;
`capture` (which target state a drafter's layer ids name, vLLM's emulated).
"""

from ddtune.engine.models.config import DrafterConfig, ModelConfig
from ddtune.engine.models.drafter import DFlashDrafter
from ddtune.engine.models.loading import load_decoder, load_drafter, save_decoder, save_drafter
from ddtune.engine.models.model import Decoder
from ddtune.engine.models.tokenizer import Tokenizer

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
