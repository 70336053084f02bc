"""Load and save Hugging Face model folders: the target decoder, DFlash drafter, EAGLE-3 head.

A folder holds `config.json`, `model.safetensors` (or a sharded
`model.safetensors.index.json`), and for a target also `tokenizer.json` and
`generation_config.json`. Missing files, missing or unexpected weights and
shape mismatches raise `UserError` naming the file.

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ddtune.ddtree.models.config import (
    DrafterConfig,
    Eagle3Config,
    ModelConfig,
    read_json,
    write_json,
)
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.eagle3 import Eagle3Head
from ddtune.ddtree.models.model import Decoder
from ddtune.errors import UserError

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def load_decoder(folder: str | Path, dtype: torch.dtype = torch.float32) -> Decoder:
    """The target decoder of a Qwen3/Llama folder (`model.cfg` holds its config)."""
    folder = _folder(folder)
    cfg = ModelConfig.from_file(folder / "config.json")
    model = Decoder(cfg)
    skip = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    _load_weights(model, folder, skip)
    return model.to(dtype).eval()


def load_drafter(folder: str | Path, dtype: torch.dtype = torch.float32) -> DFlashDrafter:
    """The DFlash drafter of a z-lab format folder (`drafter.cfg` holds its config)."""
    folder = _folder(folder)
    cfg = DrafterConfig.from_file(folder / "config.json")
    drafter = DFlashDrafter(cfg)
    _load_weights(drafter, folder, set())
    return drafter.to(dtype).eval()


def save_decoder(
    model: Decoder,
    cfg: ModelConfig,
    folder: str | Path,
    tokenizer_file: str | Path | None = None,
    generation_config: dict[str, Any] | None = None,
) -> Path:
    """Write config.json, model.safetensors, generation_config.json (and tokenizer.json)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save(folder / "config.json")
    skip = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    _save_weights(model, folder / WEIGHTS, skip)
    gen = generation_config or {"eos_token_id": cfg.eos_token_id, "bos_token_id": cfg.bos_token_id}
    write_json(folder / "generation_config.json", {k: v for k, v in gen.items() if v is not None})
    if (
        tokenizer_file is not None
        and Path(tokenizer_file).resolve() != (folder / "tokenizer.json").resolve()
    ):
        shutil.copyfile(tokenizer_file, folder / "tokenizer.json")
    return folder


def save_drafter(drafter: DFlashDrafter, cfg: DrafterConfig, folder: str | Path) -> Path:
    """Write the drafter's config.json and model.safetensors (z-lab names: fc, layers.N, norm)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save(folder / "config.json")
    _save_weights(drafter, folder / WEIGHTS, set())
    return folder


def load_eagle3(folder: str | Path, dtype: torch.dtype = torch.float32) -> Eagle3Head:
    """The EAGLE-3 head of a folder (`head.cfg` holds its config); d2t/t2d stay integer."""
    folder = _folder(folder)
    cfg = Eagle3Config.from_file(folder / "config.json")
    head = Eagle3Head(cfg)
    _load_weights(head, folder, set())
    return _float_to(head, dtype).eval()


def save_eagle3(
    head: Eagle3Head, cfg: Eagle3Config, folder: str | Path, dtype: torch.dtype = torch.bfloat16
) -> Path:
    """config.json and model.safetensors (floats in `dtype`; d2t int64, t2d bool), in the
    names released EAGLE-3 heads use (`midlayer.*`, `fc`, `norm`, `lm_head`, `d2t`, `t2d`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = str(dtype).removeprefix("torch.")
    Eagle3Config(**{**vars(cfg), "torch_dtype": name}).save(folder / "config.json")
    state = {
        k: (v.to(dtype) if v.is_floating_point() else v).detach().contiguous()
        for k, v in head.state_dict().items()
    }
    save_file(state, str(folder / WEIGHTS), metadata={"format": "pt"})
    return folder


def _float_to(module: nn.Module, dtype: torch.dtype) -> Eagle3Head:
    """Floating parameters and buffers to `dtype`; integer and bool buffers as they are."""
    for tensor in [*module.parameters(), *module.buffers()]:
        if tensor.is_floating_point():
            tensor.data = tensor.data.to(dtype)
    assert isinstance(module, Eagle3Head)
    return module


def _folder(folder: str | Path) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"model folder {folder} does not exist")
    return folder


def _read_state(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a single-file or sharded safetensors checkpoint."""
    if (folder / WEIGHTS).is_file():
        return load_file(str(folder / WEIGHTS))
    if not (folder / INDEX).is_file():
        raise UserError(f"{folder / WEIGHTS} is missing (and no sharded {INDEX} either)")
    index = read_json(folder / INDEX)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict):
        raise UserError(f"{folder / INDEX}: field 'weight_map' is missing")
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        if not (folder / shard).is_file():
            raise UserError(f"{folder / shard} is missing (listed in {INDEX})")
        state.update(load_file(str(folder / shard)))
    return state


def _load_weights(module: nn.Module, folder: Path, skip: set[str]) -> None:
    state = {k: v for k, v in _read_state(folder).items() if k not in skip}
    expected = {k: p for k, p in module.state_dict().items() if k not in skip}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise UserError(
            f"{folder}: weights do not match the config: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise UserError(
                f"{folder}: weight {name} has shape {tuple(tensor.shape)}, "
                f"config implies {tuple(expected[name].shape)}"
            )
    module.load_state_dict(state, strict=not skip)


def _save_weights(module: nn.Module, path: Path, skip: set[str]) -> None:
    state = {k: v.detach().contiguous() for k, v in module.state_dict().items() if k not in skip}
    save_file(state, str(path), metadata={"format": "pt"})
