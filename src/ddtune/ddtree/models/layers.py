"""Building blocks shared by the target decoder and the DFlash drafter.

RMSNorm, the SwiGLU MLP, the attention projections (q/k/v/o, Qwen3 q/k
norms), one layer's residual frame and attention over explicit masks.
Numerics follow the Hugging Face Qwen3/Llama code (norms in float32; RoPE
in `rope.py`).

Fused projections: the parameters keep their Hugging Face names (`q_proj`,
`gate_proj`, ...; checkpoints see nothing else), but the math runs ONE
q|k|v matmul and ONE gate|up matmul. While autograd records (training) the
stacked weight is concatenated on the fly from the named parameters, so
gradients reach them. `fuse()` (the engine calls it once after loading)
stacks them once, makes each named weight a view of the stack (one storage:
in-place updates such as `load_state_dict` or an optimizer step keep both in
step) and wraps it in a `linear.InferenceLinear` (oneDNN-prepacked), used
while autograd is off. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from ddtune.ddtree.models.config import ModelConfig
from ddtune.ddtree.models.linear import InferenceLinear
from ddtune.ddtree.models.rope import Rope, apply_rope


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused call, the same float32 math
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        return self.weight * rms_normalize(x, self.eps)


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dim, computed in float32 (HF), returned in x's dtype."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, x.shape[-1:], None, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


Proj = Callable[[torch.Tensor], torch.Tensor]  # a linear map [..., in] -> [..., out]


def concat_linears(*linears: nn.Linear) -> Proj:
    """One linear map stacking the outputs of `linears`, in order (autograd flows through)."""
    weight = torch.cat([lin.weight for lin in linears])
    bias = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])
    return functools.partial(F.linear, weight=weight, bias=bias)


def fuse_linears(*linears: nn.Linear, pack: bool) -> InferenceLinear:
    """The stacked weight (and bias) once, each layer's weight (and bias) made a view of it.

    Built as a normal tensor even inside `inference_mode`: the parameters
    keep working for training.
    """
    with torch.inference_mode(False), torch.no_grad():
        weight = torch.cat([lin.weight for lin in linears])
        bias = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])
    start = 0
    for lin in linears:
        end = start + lin.weight.shape[0]
        lin.weight.data = weight[start:end]
        if bias is not None:
            lin.bias.data = bias[start:end]
        start = end
    return InferenceLinear(weight, bias, pack, sources=parameters(*linears))


def parameters(*linears: nn.Linear) -> list[torch.Tensor]:
    """The weights and biases of `linears` (what an `InferenceLinear` watches for changes)."""
    return [p for lin in linears for p in (lin.weight, lin.bias) if p is not None]


T = TypeVar("T")


def inference(fused: T | None) -> T | None:
    """`fused` while autograd is off; None while it records (training: the named parameters)."""
    return None if torch.is_grad_enabled() else fused


def frozen(lin: nn.Linear, pack: bool) -> InferenceLinear:
    return InferenceLinear(lin.weight, lin.bias, pack, sources=parameters(lin))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up in one matmul."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        h, i, bias = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.gate_proj = nn.Linear(h, i, bias=bias)
        self.up_proj = nn.Linear(h, i, bias=bias)
        self.down_proj = nn.Linear(i, h, bias=bias)
        self.fused: tuple[Proj, Proj] | None = None  # gate|up and down, set by `fuse()`

    def fuse(self, pack: bool = True) -> None:
        gate_up = fuse_linears(self.gate_proj, self.up_proj, pack=pack)
        self.fused = gate_up, frozen(self.down_proj, pack)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up, down = inference(self.fused) or (
            concat_linears(self.gate_proj, self.up_proj),
            self.down_proj,
        )
        gate, up = gate_up(x).chunk(2, dim=-1)  # [..., I] each
        return down(F.silu(gate) * up)


class QKVOLinears(nn.Module):
    """The q/k/v/o linears of an attention under the Hugging Face names: q, k and v read
    `width` inputs (the hidden size, or EAGLE-3's doubled input), o writes the hidden size."""

    def __init__(self, cfg: ModelConfig, width: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        h, bias = cfg.hidden_size, cfg.attention_bias
        self.q_proj = nn.Linear(width, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)


class AttentionProjections(QKVOLinears):
    """q/k/v/o projections (and Qwen3's q/k norms) under the Hugging Face names.

    `project(x, rope)` runs one q|k|v matmul, normalises q and k together
    (one per-head weight [heads + kv_heads, D]) and rotates them together.
    `keys(x, rope)` runs the k|v rows alone (the drafter's context).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, cfg.hidden_size)
        self.qk_norm = cfg.uses_qk_norm
        self.eps = cfg.rms_norm_eps
        if self.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.fused: tuple[Proj, Proj, Proj] | None = None  # q|k|v, k|v, o; set by `fuse()`
        self.norm_cache: tuple[int, torch.Tensor] | None = None  # (norm versions, qk norm weight)

    def fuse(self, pack: bool = True) -> None:
        qkv = fuse_linears(self.q_proj, self.k_proj, self.v_proj, pack=pack)
        rows = self.heads * self.head_dim  # the q rows come first; k|v is a view of the rest
        bias = None if qkv.bias is None else qkv.bias[rows:]
        kv = InferenceLinear(
            qkv.weight[rows:], bias, pack, sources=parameters(self.k_proj, self.v_proj)
        )
        self.fused = qkv, kv, frozen(self.o_proj, pack)

    # Each map: fused (inference) or, while autograd records (training), built on the fly
    # from the named parameters; only the one a caller needs is built.
    def _qkv(self) -> Proj:
        fused = inference(self.fused)
        return fused[0] if fused else concat_linears(self.q_proj, self.k_proj, self.v_proj)

    def _kv(self) -> Proj:
        fused = inference(self.fused)
        return fused[1] if fused else concat_linears(self.k_proj, self.v_proj)

    def _o(self) -> Proj:
        fused = inference(self.fused)
        return fused[2] if fused else self.o_proj

    def project(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, ...]:
        """q [B, heads, T, D], k, v [B, kv_heads, T, D] for inputs x [B, T, H]; RoPE on q, k."""
        b, t, _ = x.shape
        qkv = self._qkv()(x).view(b, t, -1, self.head_dim)
        qk, v = qkv.split([self.heads + self.kv_heads, self.kv_heads], dim=2)
        qk = apply_rope(self._norm(qk).transpose(1, 2), *rope)  # [B, heads + kv_heads, T, D]
        return qk[:, : self.heads], qk[:, self.heads :], v.transpose(1, 2)

    def keys(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v [B, kv_heads, T, D] for inputs x [B, T, H], RoPE applied to k."""
        b, t, _ = x.shape
        kv = self._kv()(x).view(b, t, 2 * self.kv_heads, self.head_dim)
        k, v = kv.chunk(2, dim=2)
        if self.qk_norm:
            k = self.k_norm(k)
        return apply_rope(k.transpose(1, 2), *rope), v.transpose(1, 2)

    def output(self, attended: torch.Tensor) -> torch.Tensor:
        """o_proj: [B, T, heads * D] -> [B, T, H]."""
        return self._o()(attended)

    def _norm(self, qk: torch.Tensor) -> torch.Tensor:
        """Qwen3's q and k norms on qk [B, T, heads + kv_heads, D] (identity without them)."""
        if not self.qk_norm:
            return qk
        return self._qk_norm_weight() * rms_normalize(qk, self.eps)

    def _qk_norm_weight(self) -> torch.Tensor:
        """The q norm's weight for every query head, then the k norm's: [heads + kv_heads, D].

        Kept once fused (rebuilt if either norm weight changes in place).
        """
        if inference(self.fused) is None:
            return self._stack_qk_norms()
        version = self.q_norm.weight._version + self.k_norm.weight._version
        if self.norm_cache is None or self.norm_cache[0] != version:
            with torch.no_grad():
                self.norm_cache = version, self._stack_qk_norms()
        return self.norm_cache[1]

    def _stack_qk_norms(self) -> torch.Tensor:
        d = self.head_dim
        q = self.q_norm.weight.expand(self.heads, d)
        return torch.cat([q, self.k_norm.weight.expand(self.kv_heads, d)])


class Layer(nn.Module):
    """One pre-norm layer (HF names): `self_attn` then the SwiGLU `mlp`, each with a residual.

    The attention module decides the wiring: `forward(x, *attn_args)` passes
    `attn_args` on to `self_attn(input_layernorm(x), *attn_args)`.
    """

    def __init__(self, cfg: ModelConfig, self_attn: nn.Module) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def fuse(self, pack: bool = True) -> None:
        """Fused inference weights for the attention and the MLP (see the module doc)."""
        self.mlp.fuse(pack)
        assert isinstance(self.self_attn, AttentionProjections)
        self.self_attn.fuse(pack)

    def forward(self, x: torch.Tensor, *attn_args: object) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), *attn_args)
        return x + self.mlp(self.post_attention_layernorm(x))


def additive_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """bool [B|1, T, S] (True = attend) -> additive [B|1, 1, T, S]: 0 or -inf (once per forward)."""
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
        ~mask, float("-inf")
    )[:, None]


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
) -> torch.Tensor:
    """q [B, H, T, D], k/v [B, Hkv, S, D], `additive_mask` [B|1, 1, T, S] -> [B, T, H*D]."""
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1]
    )
    b, h, t, d = out.shape
    return out.transpose(1, 2).reshape(b, t, h * d)
