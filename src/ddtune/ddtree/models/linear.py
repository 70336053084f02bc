"""`InferenceLinear`: y = x W^T + b without autograd, the weight prepacked for oneDNN on the CPU.

At the bundled models' sizes (a few to a few dozen rows times a 256-wide
hidden state) MKL's sgemm spends much of each call repacking the weight.
oneDNN can take the weight packed once in its own blocked layout (what
torch's inductor does when it freezes a CPU model): the gate|up matmul then
runs ~35% faster and the LM head over a few rows ~40% faster
(docs/performance.md). Only wide weights are packed (`can_pack`). The
packed copy is rebuilt when a source parameter changes in place (its
version counter moves); without oneDNN, off the CPU or outside float32 it
is plain `F.linear`. The results equal `F.linear`'s up to float rounding
(another summation order). The copies double the weights' memory, so the
engine keeps them only for models up to `MAX_COPIED_BYTES` (the bundled
ones are ~35 MB). See docs/ddtree.md "Engine".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

PACK_ROWS = 17  # the row count oneDNN's packing is tuned for (any count works)
MAX_COPIED_BYTES = 1 << 30  # packed/transposed copies double the weights' memory: small models only


def worth_copying(*modules: nn.Module) -> bool:
    """The modules' parameters are small enough to keep packed/transposed copies of."""
    size = sum(p.numel() * p.element_size() for m in modules for p in m.parameters())
    return size <= MAX_COPIED_BYTES


def can_pack(weight: torch.Tensor) -> bool:
    """oneDNN packing applies and pays: a wide float32 CPU weight, torch built with oneDNN.

    Wide = more outputs than inputs (q|k|v, gate|up, the LM head): there the
    packed product is 1.3-2x faster; on square or narrow weights (o, down,
    the drafter's fc) oneDNN's ~20 us per-call overhead eats the gain and
    MKL is as fast or faster.
    """
    return (
        weight.shape[0] > weight.shape[1]
        and torch.backends.mkldnn.is_available()
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class InferenceLinear:
    """A linear map over `weight` [out, in] (and `bias` [out]) for inference only.

    With `row_copy`, a single row x [..., in] runs against a transposed copy
    of the weight ([in, out] contiguous): MKL reads that layout ~3x faster
    for one row than [out, in] (the LM head of an AR step, or of a walk
    level with one row).
    """

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        pack: bool,
        row_copy: bool = False,
        sources: Sequence[torch.Tensor] = (),
    ) -> None:
        self.weight, self.bias = weight.detach(), None if bias is None else bias.detach()
        self.pack = pack and can_pack(weight)
        self.row_copy = row_copy
        self.sources = tuple(sources) or (weight,)  # the parameters `weight` is made of
        self.packed = self.transposed = weight
        self.version = -1  # `_source_version()` when `packed` and `transposed` were made

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> [..., out]."""
        one_row = x.numel() == x.shape[-1]
        if not (self.pack or self.row_copy) or (one_row and not self.row_copy):
            return F.linear(x, self.weight, self.bias)  # MKL's gemv beats oneDNN on one row
        if self.version != self._source_version():
            self._prepare()
        if one_row:
            out = (x.reshape(-1) @ self.transposed).view(*x.shape[:-1], -1)  # [in] x [in, out]
            return out if self.bias is None else out + self.bias
        if not self.pack:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def _prepare(self) -> None:
        """(Re)build the packed and transposed copies from the weight as it is now."""
        if self.pack:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, PACK_ROWS)
        if self.row_copy:
            self.transposed = self.weight.t().contiguous()
        self.version = self._source_version()

    def _source_version(self) -> int:
        """Moves whenever a source parameter changes in place (version counters only grow)."""
        return sum(source._version for source in self.sources)
