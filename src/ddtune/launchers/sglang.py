"""The `python -m sglang.launch_server` command line for one DDTree/DFlash configuration.

ddtune's parameter vocabulary (`DecodeParams`) maps onto SGLang's DDTree PR
(sgl-project/sglang#29907) and its DFlash support like this:

    mode ddtree   --speculative-algorithm DDTREE   (+ --speculative-ddtree-budget B)
    mode dflash   --speculative-algorithm DFLASH
    mode ar       no speculative flags at all
    topk K        environment SGLANG_DDTREE_MAX_TOPK=K   (ddtree only; SGLang's default is 6)
    window W      --speculative-dflash-draft-window-size W   (omitted for "none")

`sglang_argv` returns the argv and the environment variables to add; the
`expected_server_args` dict is what `/get_server_info` must report back (it
returns SGLang's `ServerArgs` fields at the top level), so the readiness
check can tell the new configuration from the old one. The top-k cap lives in
the environment only, so SGLang cannot report it: the process environment is
the only witness (see `topk_is_reported`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.launchers.common import check_extra
from ddtune.params import DecodeParams

SGLANG_MODULE = "sglang.launch_server"
ALGORITHMS = {"ddtree": "DDTREE", "dflash": "DFLASH"}
TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
SGLANG_DEFAULT_TOPK = 6

# Flags ddtune sets itself: passing them again in `extra` would make the
# configuration ambiguous, so that is refused.
OWNED_FLAGS = (
    "--model-path",
    "--port",
    "--host",
    "--tp-size",
    "--tp",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-ddtree-budget",
    "--speculative-dflash-draft-window-size",
)


def sglang_argv(
    model_path: str | Path,
    draft_path: str | Path | None,
    params: DecodeParams | dict[str, Any],
    port: int,
    extra: Sequence[str] = (),
    *,
    python: str = "python3",
    host: str = "127.0.0.1",
    tp: int = 1,
) -> tuple[list[str], dict[str, str]]:
    """Build (argv, env additions) for one SGLang server serving `params`.

    `extra` is appended verbatim (e.g. `--mem-fraction-static 0.8`); it may
    not repeat a flag that ddtune sets. `draft_path` is required unless the
    mode is `ar`.
    """
    params = _as_params(params)
    check_extra(extra, OWNED_FLAGS)
    if tp < 1:
        raise UserError(f"tp must be a positive number of GPUs; got {tp}")
    argv = [python, "-m", SGLANG_MODULE, "--model-path", str(model_path)]
    argv += ["--host", host, "--port", str(int(port))]
    if tp > 1:
        argv += ["--tp-size", str(tp)]
    env: dict[str, str] = {}
    if params.mode != "ar":
        argv += _speculative_flags(params, draft_path)
    if params.mode == "ddtree":
        env[TOPK_ENV] = str(params.topk)
    return argv + list(extra), env


def _speculative_flags(params: DecodeParams, draft_path: str | Path | None) -> list[str]:
    """The DDTREE/DFLASH flags for a speculative mode."""
    if draft_path is None or str(draft_path) == "":
        raise UserError(
            f"mode {params.mode!r} needs a drafter: pass the DFlash draft model path "
            "(it becomes --speculative-draft-model-path)"
        )
    flags = [
        "--speculative-algorithm",
        ALGORITHMS[params.mode],
        "--speculative-draft-model-path",
        str(draft_path),
    ]
    if params.mode == "ddtree":
        flags += ["--speculative-ddtree-budget", str(params.budget)]
    if params.window is not None:
        flags += ["--speculative-dflash-draft-window-size", str(params.window)]
    return flags


def expected_server_args(
    params: DecodeParams | dict[str, Any], draft_path: str | Path | None
) -> dict[str, Any]:
    """The `/get_server_info` fields that must equal these values once the server is up.

    Only fields the launch sets are listed; SGLang fills in the rest itself
    (e.g. `speculative_num_draft_tokens`, derived from the budget or the
    drafter's block size), so those are not compared.
    """
    params = _as_params(params)
    if params.mode == "ar":
        return {"speculative_algorithm": None}
    expected: dict[str, Any] = {
        "speculative_algorithm": ALGORITHMS[params.mode],
        "speculative_draft_model_path": str(draft_path),
        "speculative_dflash_draft_window_size": params.window,
    }
    if params.mode == "ddtree":
        expected["speculative_ddtree_budget"] = params.budget
    return expected


def topk_is_reported(server_info: dict[str, Any]) -> bool:
    """Whether this SGLang build reports the DDTree top-k cap in `/get_server_info`.

    The PR reads it from the environment only; a build that adds it as a
    server argument would show `speculative_ddtree_topk` (checked, not assumed).
    """
    return "speculative_ddtree_topk" in server_info


def _as_params(params: DecodeParams | dict[str, Any]) -> DecodeParams:
    if isinstance(params, DecodeParams):
        return params
    return DecodeParams.from_dict(dict(params))


__all__ = [
    "ALGORITHMS",
    "SGLANG_DEFAULT_TOPK",
    "TOPK_ENV",
    "expected_server_args",
    "sglang_argv",
    "topk_is_reported",
]
