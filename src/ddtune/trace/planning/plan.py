"""What a trace will take, before a weight is read: memory per device, and time (torch-free).

    plan = trace_plan(target_dir, drafter_dir, dtype="bfloat16", longest=4096, tokens=60_000,
                      views=2, query_length=16, devices=[Device("cuda:0", 141e9), ...])
    print("\\n".join(plan.lines()))
    plan.refusal()          # a one-line reason when it cannot fit, else None

Sizes come from config.json and each safetensors shard's header (names,
dtypes, shapes: never the data): floating tensors count at the load dtype,
quantized ones (int8, fp8, packed int4) as stored. On top of the weights, for
the longest request (prompt + continuation + a block):

  target     the teacher-forced forward: every layer's hidden state kept
             ((layers + 1) x T x hidden), its KV cache, the logits (T x vocab), and
             the widest layer's working set (3 x T x intermediate)
  drafter    its weights, the target features it reads (T x layers read x hidden),
             and one batch of rows (32 rows x query length: the mask, the
             logits in the load dtype and as float32 log-probs)

Weights spread over the devices in proportion to their free memory (as
`device_map="auto"` fills them in order); the activations and the drafter sit
with the embeddings, on the first. On the CPU alone, loading maps the shard
files: a checkpoint converted to another dtype (float32 on disk, bf16 loaded)
is resident twice until it is loaded, so the plan takes the larger of that
and the working set. Time: loading at an assumed disk rate,
the greedy continuation as memory-bound decoding (the weights read once a
token), the forwards as compute-bound (2 FLOPs a parameter a token, active
experts only; the drafter at every continuation position, per view), at rates measured on this machine (`measured_rates`) or given.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.fingerprint import config_of
from ddtune.trace.planning.loading import DTYPE_BYTES

if TYPE_CHECKING:
    from ddtune.trace.planning.loading import Loading
    from ddtune.trace.planning.models import TraceModels
    from ddtune.trace.requests import TraceRequest, TraceSettings

ROWS = 32  # root positions per drafter forward (`trace.record.ROWS_PER_CALL`)
FLOAT_TYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
STORED_BYTES = {"I64": 8, "I32": 4, "U32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
DISK_BYTES_S = 1.5e9  # assumed read rate when loading (a local NVMe drive)
GB = 1e9


@dataclass(frozen=True)
class ModelSize:
    """A model folder's shape, from config.json and its shard headers."""

    params: int  # every parameter, experts included
    active_params: int  # those a token goes through (MoE: the experts it is routed to)
    load_bytes: int  # the weights in memory at the load dtype (quantized: as stored)
    disk_bytes: int
    layers: int
    hidden: int
    vocab: int
    intermediate: int
    kv_bytes_per_token: int  # all layers, K and V
    converted: bool = False  # floating tensors stored in another dtype than they load in


@dataclass(frozen=True)
class Device:
    name: str  # cuda:0, cpu
    free_bytes: float  # what the trace may use there


@dataclass(frozen=True)
class Rates:
    """Measured (or assumed) speeds of the devices the trace runs on."""

    flops: float  # FLOP/s of a matrix multiply
    bandwidth: float  # bytes/s of memory reads
    disk: float = DISK_BYTES_S
    source: str = "measured on this machine"


@dataclass
class TracePlan:
    target: ModelSize
    drafter: ModelSize
    bytes_per_element: int
    longest: int  # tokens of the longest request, continuation and a block included
    tokens: int  # tokens forwarded in all (prompt + continuation, every request)
    continuation: int  # traced positions (the drafter runs at each): continuation tokens
    generated: int  # continuation tokens the target must decode itself (0: given)
    views: int
    query_length: int
    devices: list[Device]
    rates: Rates
    per_device: dict[str, float] = field(default_factory=dict)

    def activation_bytes(self) -> float:
        t, b, size = self.longest, self.bytes_per_element, self.target
        kept = (size.layers + 1) * t * size.hidden * b
        working = 3 * t * size.intermediate * b
        return kept + working + t * size.kv_bytes_per_token + t * size.vocab * b

    def drafter_bytes(self) -> float:
        size, t, b = self.drafter, self.longest, self.bytes_per_element
        rows = ROWS * self.query_length
        features = t * self.target.hidden * b * 3 + t * self.drafter.hidden * b
        logits = rows * size.vocab * (b + 4 + 4 + 1)  # logits, log-probs, softmax, compare
        mask = rows * (t + rows)
        return size.load_bytes + features + logits + mask

    def loading_bytes(self) -> float:
        """The CPU's peak while loading: transformers maps the shard files, so a checkpoint
        converted to another dtype is resident twice (as stored and as loaded)."""
        t = self.target
        return t.load_bytes + (t.disk_bytes if t.converted else 0)

    def place(self) -> dict[str, float]:
        """Bytes per device: the weights in proportion to free memory, the rest on the first;
        on the CPU alone, at least the loading peak."""
        total = sum(d.free_bytes for d in self.devices) or 1.0
        out = {d.name: self.target.load_bytes * d.free_bytes / total for d in self.devices}
        first = self.devices[0].name
        out[first] += self.activation_bytes() + self.drafter_bytes()
        if [d.name for d in self.devices] == ["cpu"]:
            out["cpu"] = max(out["cpu"], self.loading_bytes())
        self.per_device = out
        return out

    def refusal(self) -> str | None:
        """Why it cannot fit (None: it fits)."""
        for device in self.devices:
            need = self.place()[device.name]
            if need > device.free_bytes:
                return (
                    f"the trace needs {need / GB:.1f} GB on {device.name}, which has "
                    f"{device.free_bytes / GB:.1f} GB free (weights "
                    f"{self.target.load_bytes / GB:.1f} GB over {len(self.devices)} device(s), "
                    f"activations for {self.longest} tokens "
                    f"{self.activation_bytes() / GB:.1f} GB, drafter "
                    f"{self.drafter_bytes() / GB:.1f} GB); name more GPUs with --devices, "
                    "lower --max-tokens, or add --offload to spill to CPU memory"
                )
        return None

    def seconds(self) -> dict[str, float]:
        """Load, the greedy continuation, the forwards; each in seconds."""
        r = self.rates
        decode = self.generated * self.target.load_bytes / r.bandwidth
        forward = 2 * self.target.active_params * self.tokens / r.flops
        d = self.drafter
        per_token = self.views * self.query_length * 2 * (d.active_params + d.hidden * d.vocab)
        return {
            "load": (self.target.disk_bytes + self.drafter.disk_bytes) / r.disk,
            "greedy": decode,
            "forward": forward + per_token * self.continuation / r.flops,
        }

    def lines(self) -> list[str]:
        placed, s = self.place(), self.seconds()
        t, dr = self.target, self.drafter
        work = s["greedy"] + s["forward"]
        out = [
            f"plan: target {t.params / 1e9:.3g} B parameters ({t.active_params / 1e9:.3g} B "
            f"active), {_bytes(t.load_bytes)} at {self.bytes_per_element} bytes; drafter "
            f"{dr.params / 1e9:.3g} B, {_bytes(dr.load_bytes)}",
            f"  longest request {self.longest} tokens: activations "
            f"{_bytes(self.activation_bytes())}, drafter at work {_bytes(self.drafter_bytes())}",
        ]
        for device in self.devices:
            out.append(
                f"  {device.name}: {_bytes(placed[device.name])} needed, "
                f"{_bytes(device.free_bytes)} free"
            )
        per_k = 1000 * work / max(self.continuation, 1)
        out.append(
            f"  time: load {_duration(s['load'])} (disk at {self.rates.disk / GB:.1f} GB/s, "
            f"assumed), greedy continuation {_duration(s['greedy'])}, forwards "
            f"{_duration(s['forward'])}: {per_k:.2f} s per 1,000 traced tokens "
            f"({self.rates.source})"
        )
        return out


def _bytes(n: float) -> str:
    return f"{n / GB:.1f} GB" if n >= GB else f"{n / 1e6:.0f} MB"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


def model_size(folder: Path, dtype: str) -> ModelSize:
    """Sizes from config.json and the safetensors headers (no weight data is read)."""
    config = _text_config(config_of(folder) or {})
    b = DTYPE_BYTES.get(dtype)
    params = load = disk = expert = 0
    converted = False
    for shard in sorted(Path(folder).glob("*.safetensors")):
        disk += shard.stat().st_size
        for name, (kind, numel) in _tensors(shard).items():
            params += numel
            stored = FLOAT_TYPES.get(kind) or STORED_BYTES.get(kind, 1)
            load += numel * (b if b and kind in FLOAT_TYPES else stored)
            converted |= bool(b and kind in FLOAT_TYPES and stored != b)
            expert += numel if ".experts." in name else 0
    routed = int(config.get("n_routed_experts") or config.get("num_experts") or 0)
    per_token = int(config.get("num_experts_per_tok") or 0)
    active = params - expert + (expert * per_token // routed if routed and per_token else expert)
    return ModelSize(
        params=params,
        active_params=active,
        load_bytes=load,
        disk_bytes=disk,
        layers=int(config.get("num_hidden_layers", 0)),
        hidden=int(config.get("hidden_size", 0)),
        vocab=int(config.get("vocab_size", 0)),
        intermediate=int(
            config.get("intermediate_size") or config.get("moe_intermediate_size") or 0
        ),
        kv_bytes_per_token=_kv_bytes(config, b or 2),
        converted=converted,
    )


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _kv_bytes(config: dict[str, Any], b: int) -> int:
    layers = int(config.get("num_hidden_layers", 0))
    if config.get("kv_lora_rank"):  # MLA (DeepSeek, Kimi): the compressed latent and rope key
        per_layer = int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim", 0))
        return layers * per_layer * b
    heads = int(config.get("num_attention_heads", 1))
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config.get("hidden_size", 0)) // heads)
    return 2 * layers * kv_heads * head_dim * b


def _tensors(shard: Path) -> dict[str, tuple[str, int]]:
    """name -> (dtype, elements), from the shard's header."""
    with shard.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return {}
        (length,) = struct.unpack("<Q", head)
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return {}
    out = {}
    for name, info in header.items():
        if name != "__metadata__" and isinstance(info, dict):
            numel = 1
            for dim in info.get("shape", []):
                numel *= int(dim)
            out[name] = (str(info.get("dtype")), numel)
    return out


def measured_rates(seconds: float = 0.3) -> Rates:
    """This machine's matrix-multiply FLOP/s and memory read rate (numpy, float32)."""
    import numpy as np

    a = np.ones((512, 512), np.float32)
    flops, start, n = 0.0, time.perf_counter(), 0
    while (elapsed := time.perf_counter() - start) < seconds / 2 or n < 2:
        a @ a
        n += 1
        flops = 2 * 512**3 * n / elapsed if elapsed else 0.0
    big = np.ones(32 * 2**20, np.float32)  # 128 MB
    start, n = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - start) < seconds / 2 or n < 2:
        big.sum()
        n += 1
    return Rates(flops=flops, bandwidth=big.nbytes * n / elapsed)


def trace_plan(
    target: Path,
    drafter: Path,
    dtype: str,
    *,
    longest: int,
    tokens: int,
    continuation: int,
    generated: int,
    views: int,
    query_length: int,
    devices: list[Device],
    rates: Rates,
) -> TracePlan:
    b = DTYPE_BYTES.get(dtype, 2)
    return TracePlan(
        model_size(target, dtype),
        model_size(drafter, dtype),
        b,
        longest,
        tokens,
        continuation,
        generated,
        views,
        query_length,
        devices,
        rates,
    )


def request_lengths(target: Path, prompts: list[str], extra: int) -> list[int]:
    """Tokens per request: the prompt (by the target's tokenizer.json where it has one, else
    one token a character: an upper bound) plus `extra` (continuation and a block)."""
    path = Path(target) / "tokenizer.json"
    if path.is_file():
        try:  # the engine extra's; a core install counts characters
            from tokenizers import Tokenizer
        except ImportError:
            return [len(p) + extra for p in prompts]
        tokenizer = Tokenizer.from_file(str(path))
        return [len(tokenizer.encode(p, add_special_tokens=False).ids) + extra for p in prompts]
    return [len(p) + extra for p in prompts]


def these_devices(names: list[str], max_memory: dict[str, str]) -> list[Device]:
    """The devices named (cuda:N, cpu) with what the trace may use there: `max_memory`, else
    what is free now (torch for a GPU, psutil for the CPU)."""
    out = []
    for name in names:
        if name in max_memory:
            out.append(Device(name, parse_bytes(max_memory[name])))
        elif name == "cpu":
            import psutil

            out.append(Device(name, float(psutil.virtual_memory().available)))
        else:
            import torch

            free, _ = torch.cuda.mem_get_info(int(name.removeprefix("cuda:")))
            out.append(Device(name, float(free)))
    return out


def parse_bytes(text: str) -> float:
    """ "70GiB", "500MB", "1.5TB" -> bytes."""
    units = {"TIB": 2**40, "GIB": 2**30, "MIB": 2**20, "TB": 1e12, "GB": 1e9, "MB": 1e6}
    upper = text.strip().upper()
    for unit, scale in units.items():
        if upper.endswith(unit):
            from ddtune.errors import UserError

            try:
                return float(upper.removesuffix(unit)) * scale
            except ValueError:
                raise UserError(f"--max-memory: {text!r} is not an amount (70GiB)") from None
    return float(upper) if upper.replace(".", "", 1).isdigit() else _bad_amount(text)


def _bad_amount(text: str) -> float:
    from ddtune.errors import UserError

    raise UserError(f"--max-memory: {text!r} is not an amount (70GiB, 500MB)")


__all__ = [
    "Device",
    "ModelSize",
    "Rates",
    "TracePlan",
    "measured_rates",
    "model_size",
    "parse_bytes",
    "request_lengths",
    "these_devices",
    "trace_plan",
]


def record_plan(
    models: TraceModels,
    loading: Loading,
    requests: Sequence[TraceRequest],
    settings: TraceSettings,
    backend: str,
) -> TracePlan:
    """The plan of one `ddtune trace record`."""
    drafter_config = config_of(models.drafter) or {}
    block = int(drafter_config.get("block_size", 16))
    extra = max((r.max_tokens for r in requests), default=0) + block
    lengths = request_lengths(models.target, [r.prompt for r in requests], extra)
    if backend == "ddtune":
        dtype, names = "float32", ["cpu"]
    else:
        dtype = loading.dtype_for(config_of(models.target))
        gpus = _gpu_count()
        names = [f"cuda:{i}" for i in loading.gpu_indices(gpus)] or ["cpu"]
        names += ["cpu"] if loading.offload and names != ["cpu"] else []
    q = max(settings.query_lengths or (block,))
    views = len(settings.windows) * max(len(settings.query_lengths), 1)
    return trace_plan(
        models.target,
        models.drafter,
        dtype,
        longest=max(lengths, default=extra),
        tokens=sum(lengths),
        continuation=sum(r.max_tokens for r in requests),
        generated=sum(r.max_tokens + block for r in requests if r.continuation is None),
        views=views,
        query_length=q,
        devices=these_devices(names, loading.max_memory),
        rates=measured_rates(),
    )


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()
