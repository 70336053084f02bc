"""`sglang`: SGLang (0.5.23 verified; the DDTree pull request sgl-project/sglang#29907 covered).

ddtune's `DecodeParams` map onto `python -m sglang.launch_server` like this:

    mode ddtree    --speculative-algorithm DDTREE (+ --speculative-ddtree-budget B)  [PR only]
    mode dflash    --speculative-algorithm DFLASH (merged; CUDA, NPU or XPU only)
    mode ar        no speculative flags at all
    drafter        --speculative-draft-model-path (0.5.23 also takes --speculative-draft-model)
    window W       the window flag this SGLang's parser knows (`WINDOW_FLAGS`, exact match:
                   --speculative-draft-window-size in 0.5.23, --speculative-dflash-draft-
                   window-size before the rename); left out for "none"
    topk K         environment SGLANG_DDTREE_MAX_TOPK=K            (ddtree only; default 6)
    depth_bonus    environment SGLANG_DDTREE_DEPTH_BONUS           (ddtree only; default 0.2)
    rank_probe     environment SGLANG_DDTREE_RANK_PROBE=true|false (ddtree only; default off)
    method         EAGLE/EAGLE3/NEXTN/NGRAM and DFLASH's block size: `method_args`, from
                   `ddtune.methods` (flags and the /server_info fields read back)

The flag names come from the installed SGLang: `window_flag(options)` picks
from its parser's option list (`EngineInfo.options`, read by the probe in
`engine_check`; the launcher reads it when it needs a window flag).
Readiness reads `/server_info` (`/get_server_info` on an older server that
lacks it): SGLang's resolved `ServerArgs` fields at the top level, compared
under 0.5.23's names (the window from whichever window field the server
reports); its `launch_command` must equal the argv of the new main process
(the witness for every flag, a user variable's included); the DDTree knobs
live in the environment only, so the main process's environment is their
witness (a knob that is not set must be absent there: SGLang's default).
Bench: the native `POST /generate` stream (cumulative text, `meta_info`);
acceptance = completion_tokens / spec_verify_ct, pooled by verify rounds; a
response without `spec_verify_ct` (SGLang adds it only after a verify round)
had no speculation. See docs/engines.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.engines.base import (
    Launch,
    ResponseStats,
    RoundTrace,
    StreamChunk,
    check_extra,
    common_launch_options,
    compare_config,
    flag_value,
    is_number,
    per_round_acceptance,
    process_cmdline,
    process_environ,
)
from ddtune.engines.openai import OpenAIEngine
from ddtune.engines.parser_probe import EngineInfo
from ddtune.errors import UserError
from ddtune.methods import SGLANG_FLAGS, sglang_flags, sglang_reported
from ddtune.params import (
    KNOB_KEYS,
    MODES,
    WINDOW_NONE,
    DecodeParams,
    SamplingParams,
    knob_to_text,
    parse_knob,
    parse_window,
)

if TYPE_CHECKING:
    import httpx

SGLANG_MODULE = "sglang.launch_server"
ALGORITHMS = {"ddtree": "DDTREE", "dflash": "DFLASH"}
DRAFTER_FLAG = "--speculative-draft-model-path"
BUDGET_FLAG = "--speculative-ddtree-budget"
WINDOW_FLAGS = ("--speculative-draft-window-size", "--speculative-dflash-draft-window-size")
WINDOW_FIELDS = ("speculative_draft_window_size", "speculative_dflash_draft_window_size")
WINDOW_FIELD = WINDOW_FIELDS[0]  # readiness compares the window under 0.5.23's name
TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
KNOB_ENV = {"depth_bonus": "SGLANG_DDTREE_DEPTH_BONUS", "rank_probe": "SGLANG_DDTREE_RANK_PROBE"}
SGLANG_DEFAULTS = {"topk": 6, "depth_bonus": 0.2, "rank_probe": False}  # the PR's, if unset
INFO_PATHS = ("/server_info", "/get_server_info")  # the second: before 0.5.x, deprecated since
REPORTED_FIELDS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_ddtree_budget",
    WINDOW_FIELD,
)
# the fields `ddtune.methods` knobs set (their flags' names with underscores)
METHOD_FIELDS = tuple(dict.fromkeys(flag[2:].replace("-", "_") for flag in SGLANG_FLAGS.values()))

# Flags ddtune sets itself: passing them again in `extra` would make the
# configuration ambiguous, so that is refused (a unique prefix of one too:
# SGLang's argparse takes abbreviations). The engine check also refuses an extra
# flag that SGLang's own parser maps onto one of `OWNED_FIELDS`.
OWNED_FLAGS = (
    "--model-path",
    "--model",
    "--port",
    "--host",
    "--tp-size",
    "--tensor-parallel-size",
    "--tp",
    "--speculative-algorithm",
    DRAFTER_FLAG,
    "--speculative-draft-model",
    BUDGET_FLAG,
    *WINDOW_FLAGS,
)
OWNED_FIELDS = (
    "model_path",
    "port",
    "host",
    "tp_size",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_ddtree_budget",
    *WINDOW_FIELDS,
)


def window_flag(options: Collection[str], version: str | None = None) -> str:
    """The draft-window flag this SGLang's parser knows, by exact option string."""
    for flag in WINDOW_FLAGS:
        if flag in options:
            return flag
    raise UserError(
        f"SGLang {version or ''} has no draft window flag (none of {', '.join(WINDOW_FLAGS)}); "
        "sweep window = 'none' only, or update ddtune.engines.sglang.WINDOW_FLAGS"
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
    window: str = WINDOW_FLAGS[0],
) -> tuple[list[str], dict[str, str]]:
    """Build (argv, env additions) for one SGLang server serving `params`.

    `extra` is appended verbatim (e.g. `--mem-fraction-static 0.8`); it may
    not repeat a flag that ddtune sets. `draft_path` is required unless the
    mode is `ar`. `window` is the window flag of the installed SGLang
    (`window_flag`).
    """
    check_extra(extra, OWNED_FLAGS)
    if tp < 1:
        raise UserError(f"tp must be a positive number of GPUs; got {tp}")
    argv = [python, "-m", SGLANG_MODULE, "--model-path", str(model_path)]
    argv += ["--host", host, "--port", str(int(port))]
    if tp > 1:
        argv += ["--tp-size", str(tp)]
    if params.mode != "ar":
        argv += _speculative_flags(params, draft_path, window)
    return argv + list(extra), ddtree_env(params)


def ddtree_env(params: DecodeParams) -> dict[str, str]:
    """The environment of a ddtree server: top-k, and the knobs that are set."""
    if params.mode != "ddtree":
        return {}
    env = {TOPK_ENV: str(params.topk)}
    env.update({KNOB_ENV[key]: knob_to_text(value) for key, value in params.knobs().items()})
    return env


def parameter_origins(window: str = WINDOW_FLAGS[0]) -> dict[str, str]:
    """Which parameter sets each flag and variable of `sglang_argv` (for the engine check's lines)."""
    origins = {"--speculative-algorithm": "mode", DRAFTER_FLAG: "drafter", BUDGET_FLAG: "budget"}
    origins[window] = "window"
    origins[TOPK_ENV] = "topk"
    origins.update({KNOB_ENV[key]: key for key in KNOB_KEYS})
    return origins


def _speculative_flags(
    params: DecodeParams, draft_path: str | Path | None, window: str
) -> list[str]:
    """The DDTREE/DFLASH flags for a speculative mode."""
    if draft_path is None or str(draft_path) == "":
        raise UserError(
            f"mode {params.mode!r} needs a drafter: pass the DFlash draft model path "
            f"(it becomes {DRAFTER_FLAG})"
        )
    flags = ["--speculative-algorithm", ALGORITHMS[params.mode], DRAFTER_FLAG, str(draft_path)]
    if params.mode == "ddtree":
        flags += [BUDGET_FLAG, str(params.budget)]
    if params.window is not None:
        flags += [window, str(params.window)]
    return flags


def expected_server_args(params: DecodeParams, draft_path: str | Path | None) -> dict[str, Any]:
    """The `/server_info` fields (0.5.23 names) that must equal these values once the server is up.

    Only fields the launch sets are listed; SGLang fills in the rest itself
    (e.g. `speculative_num_draft_tokens`, from the drafter's block size), so
    those are not compared. A `draft_path` of None means "not known here": the
    drafter field is then left out.
    """
    if params.method is not None:
        return _method_server_args(params)
    if params.mode == "ar":
        return {"speculative_algorithm": None}
    expected: dict[str, Any] = {
        "speculative_algorithm": ALGORITHMS[params.mode],
        WINDOW_FIELD: params.window,
    }
    if draft_path is not None:
        expected["speculative_draft_model_path"] = str(draft_path)
    if params.mode == "ddtree":
        expected["speculative_ddtree_budget"] = params.budget
    return expected


def _method_server_args(params: DecodeParams) -> dict[str, Any]:
    """`expected_server_args` of a config naming a method (`ddtune.methods.sglang_reported`)."""
    expected = sglang_reported(params.method_config())
    if params.method in ALGORITHMS:
        expected[WINDOW_FIELD] = params.window
    if params.mode == "ddtree":
        expected["speculative_ddtree_budget"] = params.budget
    return expected


def reported_server_args(info: Mapping[str, Any]) -> dict[str, Any]:
    """The `REPORTED_FIELDS` of a `/server_info` reply; the window from either window field;
    NEXTN as EAGLE (SGLang resolves the alias, `sglang_reported`)."""
    reported = {key: info.get(key) for key in (*REPORTED_FIELDS, *METHOD_FIELDS)}
    reported[WINDOW_FIELD] = next((info[f] for f in WINDOW_FIELDS if f in info), None)
    if reported["speculative_algorithm"] == "NEXTN":
        reported["speculative_algorithm"] = "EAGLE"
    return reported


def expected_environment(params: DecodeParams) -> dict[str, str | None]:
    """The DDTree variables the new main process must carry (None: absent, SGLang's default)."""
    if params.mode != "ddtree":
        return {}
    return {**dict.fromkeys((TOPK_ENV, *KNOB_ENV.values())), **ddtree_env(params)}


def launch_args(cmdline: Sequence[str]) -> str | None:
    """What SGLang records as `launch_command`: the argv after the module (or `serve`)."""
    items = list(cmdline)
    for marker in (SGLANG_MODULE, "serve"):
        if marker in items:
            return " ".join(items[items.index(marker) + 1 :])
    return None


def launch_drafter(launch: Launch) -> str | None:
    """The drafter the launch command names: SGLang's own flags or the launcher CLI's."""
    return flag_value(
        launch.argv, (DRAFTER_FLAG, "--speculative-draft-model", "--draft-model-path")
    )


def missing_fields(info: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Expected `/server_info` fields this SGLang does not report at all (e.g. the DDTree PR's);
    the environment's variables (upper case) are not fields."""
    fields = [key for key, value in expected.items() if key.islower() and value is not None]
    names = {WINDOW_FIELD: WINDOW_FIELDS}
    return [key for key in fields if not any(n in info for n in names.get(key, (key,)))]


class SglangEngine(OpenAIEngine):
    name = "sglang"
    health_path = "/health_generate"
    info_path = INFO_PATHS[0]
    identity_endpoints = ("/model_info", "/get_model_info")
    model_in_request = False  # /generate serves the one model
    accepts_ignore_eos = True
    acceptance_source = "meta_info"
    no_acceptance_note = (
        "acceptance length unavailable: no response carried meta_info.spec_verify_ct "
        "(SGLang reports it only after a verify round: no speculation)"
    )
    launch_help = "python -m sglang.launch_server with DDTREE/DFLASH flags"
    default_port = 30000
    knobs = KNOB_KEYS
    engine = "sglang"
    engine_modules = (SGLANG_MODULE,)
    owned_fields = OWNED_FIELDS

    def add_launch_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--draft-model-path", default=None)
        parser.add_argument("--mode", default="ddtree", choices=MODES)
        parser.add_argument("--budget", type=int, default=16)
        parser.add_argument("--topk", type=int, default=4)
        parser.add_argument(
            "--window", default=WINDOW_NONE, help="draft window in tokens, or 'none'"
        )
        for key in KNOB_KEYS:
            parser.add_argument(
                "--" + key.replace("_", "-"),
                default="default",
                help=f"sets {KNOB_ENV[key]} (ddtree only); 'default' leaves it unset "
                f"(SGLang's default: {SGLANG_DEFAULTS[key]})",
            )
        parser.add_argument("--tp", type=int, default=1)
        parser.add_argument(
            "--window-flag",
            default=None,
            help="the engine's window flag, e.g. --window-flag=--speculative-draft-window-size; "
            "default: the one its parser knows (asked when needed)",
        )

    def launch_command(
        self, args: argparse.Namespace, engine: EngineInfo | None = None
    ) -> tuple[list[str], dict[str, str]]:
        params = launch_params(args)
        return sglang_argv(
            args.model_path,
            args.draft_model_path,
            params,
            tp=args.tp,
            window=self._window_flag(args, params, engine),
            **common_launch_options(args),
        )

    def parameter_origins(self, engine: EngineInfo | None = None) -> dict[str, str]:
        return parameter_origins(self._window_for(engine))

    def method_args(self, params: DecodeParams) -> tuple[list[str], dict[str, str]]:
        """The method's flags (`ddtune.methods.sglang_flags`; the window under 0.5.23's flag,
        which the engine check checks) and, for ddtree, its budget flag and environment."""
        config = params.method_config()
        config.check_for(self.name, params.window)
        flags = sglang_flags(config, WINDOW_FLAGS[0], params.window)
        if params.mode == "ddtree":
            flags += [BUDGET_FLAG, str(params.budget)]
        return flags, ddtree_env(params)

    def _window_flag(
        self, args: argparse.Namespace, params: DecodeParams, engine: EngineInfo | None
    ) -> str:
        """`--window-flag`, else the one the engine's parser knows (asked only when needed)."""
        if args.window_flag:
            return str(args.window_flag)
        if params.mode == "ar" or params.window is None:
            return WINDOW_FLAGS[0]  # not emitted
        return self._window_for(engine or self.engine_info(args.python))

    @staticmethod
    def _window_for(engine: EngineInfo | None) -> str:
        return WINDOW_FLAGS[0] if engine is None else window_flag(engine.options, engine.version)

    # ---- readiness --------------------------------------------------------------

    def read_identity(
        self, client: httpx.Client, base_url: str, launch: Launch
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """`/server_info`; `/get_server_info` where the server has no `/server_info` (404)."""
        reply = client.get(base_url + INFO_PATHS[0])
        if reply.status_code == 404:
            reply = client.get(base_url + INFO_PATHS[1])
        info = reply.raise_for_status().json()
        if not isinstance(info, dict):
            raise ValueError(f"{reply.request.url.path} did not return a JSON object")
        return self.identity_of(info, launch), info

    def identity_of(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        return {"server_info": self.read_config(info, launch), "version": info.get("version")}

    def expected_config(self, params: DecodeParams, launch: Launch) -> dict[str, Any]:
        expected: dict[str, Any] = expected_server_args(params, launch_drafter(launch))
        if launch.main_pid:
            expected.update(expected_environment(params))
            running = launch_args(process_cmdline(launch.main_pid))
            if running is not None:
                expected["launch_command"] = running
        return expected

    def read_config(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        reported = reported_server_args(info)
        if launch.main_pid:
            environ = process_environ(launch.main_pid)
            reported.update({name: environ.get(name) for name in (TOPK_ENV, *KNOB_ENV.values())})
            reported["launch_command"] = info.get("launch_command")
        return reported

    def config_mismatches(
        self, params: DecodeParams, info: dict[str, Any], launch: Launch | None = None
    ) -> list[str]:
        """As the base's, and an expected field this SGLang does not report says so."""
        launch = launch or Launch()
        expected = self.expected_config(params, launch)
        if "launch_command" in expected and "launch_command" not in info:
            del expected["launch_command"]  # a release without it: the fields decide
        lines = compare_config(expected, self.read_config(info, launch))
        absent = missing_fields(info, expected)
        if absent:
            version = info.get("version") or "(version unknown)"
            lines.append(f"SGLang {version} reports no field {', '.join(absent)}")
        return lines

    # ---- bench ------------------------------------------------------------------

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
        """SGLang streams the cumulative text by default; incremental chunks work too. A
        chat (its OpenAI `/v1/chat/completions`, no `meta_info`) streams OpenAI chunks."""
        if "choices" in payload:
            return super().parse_chunk(payload, text_so_far)
        text = payload.get("text") or ""
        meta = payload.get("meta_info") or None
        finish = (meta or {}).get("finish_reason")
        return StreamChunk(
            text=text[len(text_so_far) :] if text.startswith(text_so_far) else text,
            finish_reason=finish.get("type") if isinstance(finish, dict) else finish,
            meta_info=meta,
        )

    def response_acceptance(self, response: ResponseStats) -> tuple[float | None, float]:
        """completion_tokens / spec_verify_ct; no `spec_verify_ct` (AR, or no verify round
        yet) is no speculation: (None, 0)."""
        meta = response.meta_info or {}
        verify, tokens = meta.get("spec_verify_ct"), meta.get("completion_tokens")
        if is_number(verify) and verify > 0 and is_number(tokens):
            return tokens / verify, float(verify)
        return None, 0.0

    def trace_acceptance(self, rounds: Sequence[RoundTrace]) -> float | None:
        return per_round_acceptance(rounds)


def launch_params(args: argparse.Namespace) -> DecodeParams:
    """The `DecodeParams` of the launcher's options (knobs as "default" or a value)."""
    wire: dict[str, Any] = {
        "mode": args.mode,
        "budget": args.budget,
        "topk": args.topk,
        "window": parse_window(args.window),
    }
    for key in KNOB_KEYS:
        value = parse_knob(key, getattr(args, key))
        if value is not None:
            wire[key] = value
    return DecodeParams.from_wire(wire)
