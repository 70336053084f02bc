"""Server profiles: which endpoints prove health and identity, and how config is compared.

    ddtune  /health_generate; /server_info (instance_id, pid, config{mode,budget,topk,window})
    sglang  /health_generate; /get_server_info speculative_* vs the request;
            SGLANG_DDTREE_MAX_TOPK from the new process's environment
    vllm    /health; /v1/models must list a model; config = the launch argv (/proc/<pid>/cmdline)
    openai  health_url (default /v1/models); identity by process only

Every profile ends with 1-token completions on /v1/completions.
`identity()` returns (identity dict, mismatches); an empty mismatch list means
the server runs the requested configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from ddtune.params import DecodeParams
from ddtune.services import procs
from ddtune.services.spec import ServiceSpec

SGLANG_ALGORITHMS = {"ar": None, "dflash": "DFLASH", "ddtree": "DDTREE"}


@dataclass
class Launch:
    """What the protocol knows about the new instance (for process-based checks)."""

    main_pid: int | None = None
    argv: list[str] | None = None


class Profile:
    """Base profile: health path, identity probe, config comparison."""

    name = "openai"
    health_path = "/v1/models"

    def __init__(self, spec: ServiceSpec) -> None:
        self.spec = spec

    def health_url(self) -> str:
        return self.spec.health_url or self.spec.base_url + self.health_path

    def identity(
        self, client: httpx.Client, params: dict[str, Any], launch: Launch
    ) -> tuple[dict[str, Any], list[str]]:
        return {}, []

    def model_name(self, client: httpx.Client) -> str:
        if self.spec.model:
            return self.spec.model
        data = client.get(self.spec.base_url + "/v1/models").json()
        return data["data"][0]["id"]


class DdtuneProfile(Profile):
    name = "ddtune"
    health_path = "/health_generate"

    def identity(self, client, params, launch):
        info = client.get(self.spec.base_url + "/server_info").raise_for_status().json()
        ident = {
            k: info.get(k)
            for k in (
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
        }
        ident["config"] = info.get("config")
        return ident, compare_ddtune_config(params, info.get("config") or {})


class SglangProfile(Profile):
    name = "sglang"
    health_path = "/health_generate"

    def identity(self, client, params, launch):
        info = client.get(self.spec.base_url + "/get_server_info").raise_for_status().json()
        reported = {
            "speculative_algorithm": info.get("speculative_algorithm"),
            "speculative_ddtree_budget": info.get("speculative_ddtree_budget"),
            "speculative_dflash_draft_window_size": info.get(
                "speculative_dflash_draft_window_size"
            ),
        }
        if launch.main_pid:
            reported["SGLANG_DDTREE_MAX_TOPK"] = procs.read_environ(launch.main_pid).get(
                "SGLANG_DDTREE_MAX_TOPK"
            )
        return {"server_info": reported}, compare_sglang_config(params, reported)


class VllmProfile(Profile):
    name = "vllm"
    health_path = "/health"

    def identity(self, client, params, launch):
        models = client.get(self.spec.base_url + "/v1/models").raise_for_status().json()
        ids = [m.get("id") for m in models.get("data", [])]
        mismatches = [] if ids else ["/v1/models lists no model"]
        if launch.main_pid and launch.argv is not None:
            running = procs.read_cmdline(launch.main_pid)
            # a script's shebang puts the interpreter first: compare the arguments only
            if running[len(running) - len(launch.argv) + 1 :] != launch.argv[1:]:
                mismatches.append(
                    f"process argv {running} differs from the launch argv {launch.argv}"
                )
        return {"models": ids}, mismatches


PROFILES = {p.name: p for p in (DdtuneProfile, SglangProfile, VllmProfile, Profile)}


def make_profile(spec: ServiceSpec) -> Profile:
    return PROFILES[spec.profile](spec)


def compare_ddtune_config(params: dict[str, Any], reported: dict[str, Any]) -> list[str]:
    """Mismatches between the requested DecodeParams and the server's config (canonical forms)."""
    keys = ("mode", "budget", "topk", "window")
    try:
        want = (
            DecodeParams.from_dict({k: params[k] for k in keys if k in params})
            .canonical()
            .to_dict()
        )
        got = (
            DecodeParams.from_dict({k: reported.get(k) for k in keys if k in reported})
            .canonical()
            .to_dict()
        )
    except Exception as exc:  # the server reported something unparsable
        return [f"reported config {reported!r} is not valid: {exc}"]
    return [
        f"{k}: requested {want[k]!r}, server reports {got[k]!r}" for k in keys if want[k] != got[k]
    ]


def compare_sglang_config(params: dict[str, Any], reported: dict[str, Any]) -> list[str]:
    mode = params.get("mode", "ddtree")
    want: dict[str, Any] = {"speculative_algorithm": SGLANG_ALGORITHMS[mode]}
    if mode in ("dflash", "ddtree"):
        want["speculative_dflash_draft_window_size"] = params.get("window")
    if mode == "ddtree":
        want["speculative_ddtree_budget"] = params.get("budget")
        if "SGLANG_DDTREE_MAX_TOPK" in reported:
            want["SGLANG_DDTREE_MAX_TOPK"] = str(params.get("topk"))
    return [
        f"{k}: requested {v!r}, server reports {reported.get(k)!r}"
        for k, v in want.items()
        if reported.get(k) != v
    ]


def generate_one_token(client: httpx.Client, spec: ServiceSpec, model: str) -> str | None:
    """One 1-token completion; None on success, else why it failed."""
    body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0}
    reply = client.post(spec.base_url + "/v1/completions", json=body)
    if reply.status_code != 200:
        return f"/v1/completions returned {reply.status_code}: {reply.text[:200]}"
    choices = reply.json().get("choices") or []
    if not choices:
        return "/v1/completions returned no choices"
    return None
