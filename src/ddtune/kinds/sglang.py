"""`sglang`: SGLang with the DDTree PR (sgl-project/sglang#29907) and its DFlash support.

ddtune's `DecodeParams` map onto `python -m sglang.launch_server` like this:

    mode ddtree   --speculative-algorithm DDTREE   (+ --speculative-ddtree-budget B)
    mode dflash   --speculative-algorithm DFLASH
    mode ar       no speculative flags at all
    topk K        environment SGLANG_DDTREE_MAX_TOPK=K   (ddtree only; SGLang's default is 6)
    window W      --speculative-dflash-draft-window-size W   (omitted for "none")

`sglang_argv` returns the argv and the environment variables to add;
`expected_server_args` is what `/get_server_info` must report back (SGLang's
`ServerArgs` fields at the top level). Readiness compares exactly those, plus
the top-k cap, which lives in the environment only: the new main process's
environment is its witness. The drafter is compared when the launch command
names it. Bench: the native `POST /generate` stream (cumulative text,
`meta_info`); acceptance = completion_tokens / spec_verify_ct, pooled by
verify rounds. See docs/architecture.md "Kinds" and docs/engines.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.kinds.base import (
    Launch,
    ResponseStats,
    StreamChunk,
    check_extra,
    common_launch_options,
    flag_value,
    is_number,
    process_environ,
)
from ddtune.kinds.openai import OpenAIKind
from ddtune.params import MODES, WINDOW_NONE, DecodeParams, SamplingParams, parse_window

SGLANG_MODULE = "sglang.launch_server"
ALGORITHMS = {"ddtree": "DDTREE", "dflash": "DFLASH"}
TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
SGLANG_DEFAULT_TOPK = 6
DRAFTER_FLAG = "--speculative-draft-model-path"
REPORTED_FIELDS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_ddtree_budget",
    "speculative_dflash_draft_window_size",
)

# Flags ddtune sets itself: passing them again in `extra` would make the
# configuration ambiguous, so that is refused.
OWNED_FLAGS = (
    "--model-path",
    "--port",
    "--host",
    "--tp-size",
    "--tp",
    "--speculative-algorithm",
    DRAFTER_FLAG,
    "--speculative-ddtree-budget",
    "--speculative-dflash-draft-window-size",
)


def sglang_argv(
    model_path: str | Path,
    draft_path: str | Path | None,
    params: DecodeParams,
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
            f"(it becomes {DRAFTER_FLAG})"
        )
    flags = ["--speculative-algorithm", ALGORITHMS[params.mode], DRAFTER_FLAG, str(draft_path)]
    if params.mode == "ddtree":
        flags += ["--speculative-ddtree-budget", str(params.budget)]
    if params.window is not None:
        flags += ["--speculative-dflash-draft-window-size", str(params.window)]
    return flags


def expected_server_args(params: DecodeParams, draft_path: str | Path | None) -> dict[str, Any]:
    """The `/get_server_info` fields that must equal these values once the server is up.

    Only fields the launch sets are listed; SGLang fills in the rest itself
    (e.g. `speculative_num_draft_tokens`, derived from the budget or the
    drafter's block size), so those are not compared. A `draft_path` of None
    means "not known here": the drafter field is then left out.
    """
    if params.mode == "ar":
        return {"speculative_algorithm": None}
    expected: dict[str, Any] = {
        "speculative_algorithm": ALGORITHMS[params.mode],
        "speculative_dflash_draft_window_size": params.window,
    }
    if draft_path is not None:
        expected["speculative_draft_model_path"] = str(draft_path)
    if params.mode == "ddtree":
        expected["speculative_ddtree_budget"] = params.budget
    return expected


def topk_is_reported(server_info: dict[str, Any]) -> bool:
    """Whether this SGLang build reports the DDTree top-k cap in `/get_server_info`.

    The PR reads it from the environment only; a build that adds it as a
    server argument would show `speculative_ddtree_topk` (checked, not assumed).
    """
    return "speculative_ddtree_topk" in server_info


def launch_drafter(launch: Launch) -> str | None:
    """The drafter the launch command names: SGLang's own flag or the launcher CLI's."""
    return flag_value(launch.argv, (DRAFTER_FLAG, "--draft-model-path"))


class SglangKind(OpenAIKind):
    name = "sglang"
    health_path = "/health_generate"
    info_path = "/get_server_info"
    identity_endpoints = ("/get_model_info", "/server_info")
    model_in_request = False  # /generate serves the one model
    accepts_ignore_eos = True
    acceptance_source = "meta_info"
    no_acceptance_note = (
        "acceptance length unavailable: no response carried meta_info.spec_verify_ct "
        "(speculation off?)"
    )
    launch_help = "python -m sglang.launch_server with DDTREE/DFLASH flags"
    default_port = 30000

    def add_launch_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--draft-model-path", default=None)
        parser.add_argument("--mode", default="ddtree", choices=MODES)
        parser.add_argument("--budget", type=int, default=16)
        parser.add_argument("--topk", type=int, default=4)
        parser.add_argument(
            "--window", default=WINDOW_NONE, help="draft window in tokens, or 'none'"
        )
        parser.add_argument("--tp", type=int, default=1)

    def launch_command(self, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
        params = DecodeParams.from_wire(
            {
                "mode": args.mode,
                "budget": args.budget,
                "topk": args.topk,
                "window": parse_window(args.window),
            }
        )
        return sglang_argv(
            args.model_path,
            args.draft_model_path,
            params,
            tp=args.tp,
            **common_launch_options(args),
        )

    def identity_of(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        return {"server_info": self.read_config(info, launch)}

    def expected_config(self, params: DecodeParams, launch: Launch) -> dict[str, Any]:
        expected = expected_server_args(params, launch_drafter(launch))
        if params.mode == "ddtree" and launch.main_pid:
            expected[TOPK_ENV] = str(params.topk)
        return expected

    def read_config(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        reported = {key: info.get(key) for key in REPORTED_FIELDS}
        if launch.main_pid:
            reported[TOPK_ENV] = process_environ(launch.main_pid).get(TOPK_ENV)
        return reported

    def generate_request(
        self, base_url: str, prompt: str, sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
        }
        if sampling.top_p != 1.0:
            params["top_p"] = sampling.top_p
        if sampling.ignore_eos:
            params["ignore_eos"] = True
        if sampling.stop_strings:
            params["stop"] = list(sampling.stop_strings)
        return f"{base_url}/generate", {"text": prompt, "sampling_params": params, "stream": True}

    def parse_chunk(self, payload: dict[str, Any], text_so_far: str) -> StreamChunk:
        """SGLang streams the cumulative text by default; incremental chunks work too."""
        text = payload.get("text") or ""
        meta = payload.get("meta_info") or None
        finish = (meta or {}).get("finish_reason")
        return StreamChunk(
            text=text[len(text_so_far) :] if text.startswith(text_so_far) else text,
            finish_reason=finish.get("type") if isinstance(finish, dict) else finish,
            meta_info=meta,
        )

    def response_acceptance(self, response: ResponseStats) -> tuple[float | None, float]:
        meta = response.meta_info or {}
        verify, tokens = meta.get("spec_verify_ct"), meta.get("completion_tokens")
        if is_number(verify) and verify > 0 and is_number(tokens):
            return tokens / verify, float(verify)
        return None, 0.0
