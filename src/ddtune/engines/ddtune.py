"""`ddtune`: ddtune's own server (`ddtune serve`, docs/server.md "Server", docs/readiness.md "Engines").

health      GET /health_generate (200 after a real 1-token generation)
identity    GET /server_info: instance_id, pid, start/ready times, config_hash,
            config_generation, what is served (weights' sha256, model, versions)
config      /server_info `config` {mode, budget, topk, window} = the requested
            `DecodeParams`, both in canonical form (an `ar` server's budget is moot)
generate    the OpenAI completions stream, with the `ignore_eos` extension
acceptance  per response: `usage.spec = {rounds, accepted_tokens,
            mean_acceptance_length}`, weighted by rounds
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddtune.engines.base import Launch, ResponseStats, RoundTrace, is_number, per_round_acceptance
from ddtune.engines.openai import OpenAIEngine
from ddtune.errors import UserError
from ddtune.params import MODE_PARAMS, PARAM_KEYS, DecodeParams

IDENTITY_KEYS = (
    "instance_id",
    "pid",
    "started_at",
    "ready_at",
    "config_hash",
    "config_generation",
    # what is served, the same for every config: the report compares these
    "target_sha256",
    "drafter_sha256",
    "model",
    "versions",
    "max_context",
)


class DdtuneEngine(OpenAIEngine):
    name = "ddtune"
    health_path = "/health_generate"
    info_path = "/server_info"
    identity_endpoints = ("/server_info",)
    accepts_ignore_eos = True
    supports_logprobs = True
    returns_token_ids = True
    acceptance_source = "usage.spec"
    no_acceptance_note = (
        "acceptance length unavailable: no response carried usage.spec (speculation off?)"
    )

    def method_args(self, params: DecodeParams) -> tuple[list[str], dict[str, str]]:
        """`ddtune serve` flags: --mode, and --budget/--topk/--window where the mode reads them."""
        params.method_config().check_for(self.name, params.window)
        wire = params.canonical().to_wire()
        flags = ["--mode", params.mode]
        for key in MODE_PARAMS[params.mode]:
            flags += [f"--{key}", str(wire[key])]
        return flags, {}

    def identity_of(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        return {**{key: info.get(key) for key in IDENTITY_KEYS}, "config": info.get("config")}

    def expected_config(self, params: DecodeParams, launch: Launch) -> dict[str, Any]:
        return params.canonical().to_wire()

    def read_config(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        """The reported `config` (a /server_info or /v1/ddtree/config reply), canonical."""
        config = info.get("config")
        if not isinstance(config, dict):
            raise UserError(f"config must be a table; got {config!r}")
        picked = {key: config[key] for key in PARAM_KEYS if key in config}
        return DecodeParams.from_wire(picked, "config").canonical().to_wire()

    def response_acceptance(self, response: ResponseStats) -> tuple[float | None, float]:
        spec = (response.usage or {}).get("spec") or {}
        rounds, mean = spec.get("rounds"), spec.get("mean_acceptance_length")
        if is_number(rounds) and rounds > 0 and is_number(mean):
            return float(mean), float(rounds)
        return None, 0.0

    def trace_acceptance(self, rounds: Sequence[RoundTrace]) -> float | None:
        return per_round_acceptance(rounds)
