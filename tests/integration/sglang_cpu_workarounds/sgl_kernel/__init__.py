"""WORKAROUND (test-only): a stand-in for `sgl_kernel`, which has no CPU wheel on PyPI.

NOT the real sglang-kernel. SGLang 0.5.23 imports `sgl_kernel` at module level
on its CPU path (e.g. `if _is_cpu: from sgl_kernel import ...`). This module
gives the AR path what it calls, as pure PyTorch:

    assign_req_to_token_pool_cpu   req_to_token[row, start:end] = out_cache_loc[...]
                                   (every extend and decode batch)
    copy_all_layer_kv_cache_cpu    the KV-slot move of a speculative pool (gather,
                                   then scatter); AR pools never call it

Speculative-only names in `RAISING` import but raise NotImplementedError when
called. Every other name and every submodule is absent, so SGLang's own
`try: from sgl_kernel... except ImportError` fallbacks behave as on a machine
without the kernel, and no `torch.ops.sgl_kernel.*` op exists (AMX paths off).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

__version__ = "0.0.0+ddtune-test-workaround"
IS_DDTUNE_WORKAROUND = True
RAISING = frozenset(
    {
        "build_tree_kernel_efficient_cpu",
        "verify_tree_greedy_cpu",
        "fill_accept_out_cache_loc_cpu",
        "fill_bonus_tokens_cpu",
        "rotate_input_ids_cpu",
        "assign_draft_cache_locs_contiguous_cpu",
        "assign_extend_cache_locs_cpu",
    }
)


def assign_req_to_token_pool_cpu(
    req_pool_indices: Any,
    req_to_token: Any,
    start_offset: Any,
    end_offset: Any,
    out_cache_loc: Any,
    pool_len: int,
) -> None:
    """For request i: req_to_token[rows[i], start[i]:end[i]] = the next entries of out_cache_loc."""
    out = out_cache_loc.to(req_to_token.dtype)
    offset = 0
    rows, starts, ends = req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()
    for row, start, end in zip(rows, starts, ends, strict=True):
        if end > start:
            req_to_token[row, start:end] = out[offset : offset + end - start]
        offset += end - start


def copy_all_layer_kv_cache_cpu(data_ptrs: Any, strides: Any, tgt_loc: Any, src_loc: Any) -> None:
    """Copy row src_loc[j] to row tgt_loc[j] of every buffer (base data_ptrs[i], row
    width strides[i] bytes); gather, then scatter, so overlapping rows are safe."""
    import torch

    if tgt_loc.numel() == 0:
        return
    target, source = tgt_loc.reshape(-1).long().cpu(), src_loc.reshape(-1).long().cpu()
    rows = int(max(int(target.max()), int(source.max()))) + 1
    for pointer, stride in zip(
        data_ptrs.reshape(-1).tolist(), strides.reshape(-1).tolist(), strict=True
    ):
        raw = (ctypes.c_uint8 * (rows * int(stride))).from_address(int(pointer))
        view = torch.frombuffer(raw, dtype=torch.uint8).view(rows, int(stride))
        view[target] = view[source]


def _raiser(name: str) -> Callable[..., Any]:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError(
            f"sgl_kernel.{name}: ddtune's test workaround has no kernel; "
            "this path needs the real sglang-kernel (a GPU or AMX build)"
        )

    refuse.__name__ = name
    return refuse


def __getattr__(name: str) -> Any:
    if name in RAISING:
        return _raiser(name)
    raise AttributeError(f"module 'sgl_kernel' has no attribute {name!r} (test workaround)")
