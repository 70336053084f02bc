"""How the transformers backend loads a target: as the serving engine would (torch-free).

  loading = Loading(dtype="auto", devices=("cuda:0", "cuda:1"), trust_remote_code=True)
  loading.dtype_for(config)          # "bfloat16": the config's own dtype, else bf16
  loading.placement(gpu_count)       # from_pretrained's device_map / max_memory

- dtype       "auto": the model's own (`torch_dtype`/`dtype` in config.json), else
              bfloat16, as vLLM and SGLang serve it; a quantized checkpoint
              (`quantization_config`) loads as transformers loads it (dtype "auto")
- code        `trust_remote_code` only when asked (the spec's command has it)
- devices     the GPUs named (`--devices 0,1` or `cuda:0,cuda:1`), each up to its
              `--max-memory` (or all of it); layers spread over them in order
              (`device_map="auto"` within those GPUs only); "cpu" for the CPU
- offload     layers that do not fit go to CPU memory only with `--offload`;
              without it a model that does not fit is refused before loading
              (`trace.planning.plan`)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddtune.errors import UserError

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
EXTRA_HINT = "pip install 'ddtune[transformers]'"


@dataclass(frozen=True)
class Loading:
    device: str = "auto"  # auto | cpu | cuda: where, when --devices is not given
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    devices: tuple[str, ...] = ()  # GPUs named by the user: ("cuda:0", "cuda:1")
    max_memory: dict[str, str] = field(default_factory=dict)  # "cuda:0"/"cpu" -> "70GiB"
    offload: bool = False
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        if self.dtype != "auto" and self.dtype not in DTYPE_BYTES:
            raise UserError(
                f"--dtype must be auto or one of {', '.join(DTYPE_BYTES)}; got {self.dtype!r}"
            )

    def dtype_for(self, config: dict[str, Any] | None) -> str:
        """The dtype the target loads in ("auto" for a quantized checkpoint)."""
        if self.dtype != "auto":
            return self.dtype
        config = config or {}
        if config.get("quantization_config"):
            return "auto"
        own = config.get("torch_dtype") or config.get("dtype")
        return own if own in DTYPE_BYTES else "bfloat16"

    def on_cpu(self, gpu_count: int) -> bool:
        if self.devices:
            return self.devices == ("cpu",)
        return self.device == "cpu" or gpu_count == 0

    def gpu_indices(self, gpu_count: int) -> list[int]:
        """The GPUs named (all of them when none are), checked against those present."""
        if self.on_cpu(gpu_count):
            return []
        named = [_gpu_index(d) for d in self.devices] or list(range(gpu_count))
        absent = [i for i in named if i >= gpu_count]
        if absent:
            raise UserError(
                f"--devices names cuda:{absent[0]}, but this machine has {gpu_count} GPU(s)"
            )
        return named

    def placement(self, gpu_count: int) -> dict[str, Any]:
        """from_pretrained's placement arguments."""
        gpus = self.gpu_indices(gpu_count)
        if not gpus:
            return {}
        budget: dict[int | str, str] = {
            i: self.max_memory[f"cuda:{i}"] for i in gpus if f"cuda:{i}" in self.max_memory
        }
        if self.offload:
            budget["cpu"] = self.max_memory.get("cpu", "1000GiB")
        if len(gpus) == 1 and not self.offload and not budget:
            return {"device_map": f"cuda:{gpus[0]}"}
        full = {i: f"{_gpu_total_gib(i)}GiB" for i in gpus if i not in budget}
        return {"device_map": "auto", "max_memory": {**full, **budget}}


def parse_devices(text: str | None) -> tuple[str, ...]:
    """`--devices 0,1` / `cuda:0,cuda:1` / `cpu` -> ("cuda:0", "cuda:1") / ("cpu",)."""
    if not text:
        return ()
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part == "cpu":
            out.append("cpu")
        else:
            out.append(f"cuda:{_gpu_index(part)}")
    if "cpu" in out and len(out) > 1:
        raise UserError("--devices: name GPUs (0,1 or cuda:0,cuda:1) or cpu, not both")
    return tuple(out)


def parse_max_memory(items: list[str]) -> dict[str, str]:
    """`--max-memory cuda:0=70GiB --max-memory cpu=200GiB` -> {"cuda:0": "70GiB", ...}."""
    out = {}
    for item in items:
        device, eq, amount = item.partition("=")
        if not eq or not amount.strip():
            raise UserError(f"--max-memory takes DEVICE=AMOUNT (cuda:0=70GiB); got {item!r}")
        key = "cpu" if device.strip() == "cpu" else f"cuda:{_gpu_index(device.strip())}"
        out[key] = amount.strip()
    return out


def _gpu_index(text: str) -> int:
    digits = text.removeprefix("cuda:")
    if not digits.isdigit():
        raise UserError(f"--devices: {text!r} is not a GPU (0, 1, ... or cuda:0, cuda:1, ...)")
    return int(digits)


def _gpu_total_gib(index: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(index).total_memory // 2**30)


def require_transformers(placement: dict[str, Any] | None = None) -> None:
    """A UserError naming the extra when transformers (or, to place over GPUs, accelerate)
    is not installed."""
    import importlib.util

    wanted = ["transformers", *(["accelerate"] if placement else [])]
    missing = [m for m in wanted if importlib.util.find_spec(m) is None]
    if missing:
        raise UserError(
            f"--backend transformers needs {' and '.join(missing)}, not installed here: "
            f"{EXTRA_HINT}"
        )


__all__ = ["DTYPE_BYTES", "Loading", "parse_devices", "parse_max_memory", "require_transformers"]
