"""The `ServerEngine` interface: everything ddtune knows about one server engine.

An engine answers, for the services, the bench and the launcher CLI alike
(docs/readiness.md "Engines"):

    launch      launch_help, add_launch_options(parser), launch_command(args, engine) -> (argv, env),
                method_args(params) -> (flags, env): a method's spelling (`ddtune.methods`)
    engine      engine (its argument probe), engine_modules, owned_fields, knobs,
                engine_info(python), parameter_origins(engine): the engine check's inputs
    readiness   health_url(base), read_identity(client, base, launch) -> (identity, info),
                expected_config(params, launch), read_config(info, launch),
                config_mismatches(params, info, launch), model_name, generate_one_token
    bench       identity_endpoints, model_in_request, supports_logprobs, generate_request(base, prompt,
                sampling, model) -> (url, body), parse_chunk(payload, text_so_far)
    acceptance  acceptance_source, response_acceptance(response), metrics_path,
                counter_acceptance(before, after), no_acceptance_note; for a trace's
                replay (`ddtune.trace`): drafts_every_round, trace_acceptance(rounds), the
                figure this engine's source would report for rounds a trace predicts

`Launch` is what the controller knows about the instance it started (main
PID, argv): the process itself is a witness for what a server cannot report.
Parameters are `DecodeParams` / `SamplingParams`, never dicts. Importing an
engine never loads torch or httpx (the launcher CLI runs before the engine).
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard

import psutil

from ddtune.engines.parser_probe import EngineCommand, EngineInfo, EngineProbe, ProbeError
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class Launch:
    """What the controller knows about the new instance (for process-based checks)."""

    main_pid: int | None = None
    argv: list[str] | None = None


@dataclass(frozen=True)
class StreamChunk:
    """One parsed stream event: the new text and whatever stats it carried."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None  # OpenAI `usage` (the last chunk)
    meta_info: dict[str, Any] | None = None  # SGLang `meta_info` (every chunk)
    fingerprint: str | None = None  # OpenAI `system_fingerprint` (ddtune: config + generation)


@dataclass(frozen=True)
class RoundTrace:
    """One request's verify rounds as a trace replays them (`ddtune.trace`)."""

    lengths: tuple[int, ...]  # tokens each round commits, bonus included
    completion_tokens: int  # what `usage.completion_tokens` reports (prefill token, stop token)
    max_tokens: int


def per_round_acceptance(rounds: Sequence[RoundTrace]) -> float | None:
    """Completion tokens over verify rounds, pooled (ddtune `usage.spec`, SGLang `meta_info`)."""
    counted = [r for r in rounds if r.lengths]
    verify = sum(len(r.lengths) for r in counted)
    return sum(r.completion_tokens for r in counted) / verify if verify else None


class ResponseStats(Protocol):
    """The per-response statistics a streamed reply left (bench's `StreamRecord`)."""

    usage: dict[str, Any] | None
    meta_info: dict[str, Any] | None


class ServerEngine(ABC):
    """One kind of server; subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    health_path: ClassVar[str] = "/v1/models"  # 200 = healthy
    info_path: ClassVar[str | None] = None  # identity + config endpoint; None: process only
    identity_endpoints: ClassVar[tuple[str, ...]] = ("/v1/models",)  # bench: first that answers
    model_in_request: ClassVar[bool] = True  # the bench request names the model
    supports_logprobs: ClassVar[bool] = False  # completions `logprobs: N` (bench: logit gaps)
    # completions take a prompt of token ids and answer with `prompt_token_ids` and
    # `token_ids` when asked (`return_token_ids`: vLLM's extension; bench: token paths, probes)
    returns_token_ids: ClassVar[bool] = False
    acceptance_source: ClassVar[str | None] = None  # "usage.spec" | "meta_info" | "prometheus"
    metrics_path: ClassVar[str | None] = None  # counters read around the measured requests
    no_acceptance_note: ClassVar[str] = "acceptance length unavailable"
    launch_help: ClassVar[str | None] = None  # set when the kind builds a launch command
    default_port: ClassVar[int] = 8000
    knobs: ClassVar[tuple[str, ...]] = ()  # the DecodeParams knobs (KNOB_KEYS) it honours
    engine: ClassVar[str | None] = None  # its argument probe (engines/probes); None: no check
    engine_modules: ClassVar[tuple[str, ...]] = ()  # `python -m MODULE` runs the engine
    owned_fields: ClassVar[tuple[str, ...]] = ()  # engine fields ddtune sets; extra may not

    # ---- launch -----------------------------------------------------------------

    def add_launch_options(self, parser: argparse.ArgumentParser) -> None:
        """The kind's own options of `python -m ddtune.launchers <kind>`."""
        raise UserError(f"engine {self.name!r} has no launch command")

    def launch_command(
        self, args: argparse.Namespace, engine: EngineInfo | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """(argv, environment additions) for parsed launcher options; `engine` is what the
        engine's parser accepts, when known (else asked where a flag name depends on it)."""
        raise UserError(f"engine {self.name!r} has no launch command")

    def method_args(self, params: DecodeParams) -> tuple[list[str], dict[str, str]]:
        """(flags, environment) that select `params`' method and knobs on this engine (a
        sweep command's `{method_args}`); UserError where the engine has no such spelling."""
        raise UserError(
            f"engine {self.name!r} cannot spell a method's flags; write them in "
            "service.command with placeholders instead of {method_args}"
        )

    def parameter_origins(self, engine: EngineInfo | None = None) -> dict[str, str]:
        """The parameter behind each flag or variable `launch_command` sets."""
        return {}

    def launch_notes(self, command: EngineCommand, cwd: str) -> list[str]:
        """Warnings about a launch command the engine accepted (the engine check prints them)."""
        return []

    def engine_info(self, python: str) -> EngineInfo:
        """Version and options of the engine in `python`, from its own parser (`parser_probe`)."""
        if self.engine is None:
            raise UserError(f"engine {self.name!r} has no argument check")
        try:
            with EngineProbe(self.engine, python, timeout=600.0) as probe:
                return probe.info()
        except ProbeError as exc:
            raise UserError(f"cannot read the {self.engine} options from {python}: {exc}") from None

    # ---- readiness --------------------------------------------------------------

    def health_url(self, base_url: str) -> str:
        return base_url + self.health_path

    def read_identity(
        self, client: httpx.Client, base_url: str, launch: Launch
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(identity to record, the `info_path` reply); ({}, {}) for an engine without one."""
        if self.info_path is None:
            return {}, {}
        info = client.get(base_url + self.info_path).raise_for_status().json()
        if not isinstance(info, dict):
            raise ValueError(f"{self.info_path} did not return a JSON object")
        return self.identity_of(info, launch), info

    def identity_of(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        """The identity fields of an `info_path` reply."""
        return {}

    def expected_config(self, params: DecodeParams, launch: Launch) -> dict[str, Any]:
        """The fields `read_config` must give back once the server runs `params`."""
        return {}

    def read_config(self, info: dict[str, Any], launch: Launch) -> dict[str, Any]:
        """The configuration the server (or its process) reports; UserError when unreadable."""
        return {}

    def config_mismatches(
        self, params: DecodeParams, info: dict[str, Any], launch: Launch | None = None
    ) -> list[str]:
        """`expected_config` vs `read_config`, one line per differing field ([] = matches)."""
        launch = launch or Launch()
        try:
            reported = self.read_config(info, launch)
        except UserError as exc:
            return [f"the config {self.info_path} reports is not valid: {exc}"]
        return compare_config(self.expected_config(params, launch), reported)

    def model_name(self, client: httpx.Client, base_url: str) -> str:
        """The first model `/v1/models` lists (KeyError/IndexError while it lists none)."""
        data = client.get(base_url + "/v1/models").raise_for_status().json()
        model = data["data"][0]["id"]
        if not isinstance(model, str):
            raise ValueError(f"/v1/models lists a model whose id is {model!r}")
        return model

    def context_length(self, client: httpx.Client, base_url: str) -> int | None:
        """The context the server says it serves (`max_model_len` of its first `/v1/models`
        entry: ddtune, vLLM, SGLang); None when it does not say."""
        try:
            data = client.get(base_url + "/v1/models").raise_for_status().json()
            value = data["data"][0].get("max_model_len")
        except (httpx.HTTPError, ValueError, LookupError, TypeError, AttributeError):
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def generate_one_token(self, client: httpx.Client, base_url: str, model: str) -> str | None:
        """One 1-token completion; None on success, else why it failed."""
        body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0}
        reply = client.post(base_url + "/v1/completions", json=body)
        if reply.status_code != 200:
            return f"/v1/completions returned {reply.status_code}: {reply.text[:200]}"
        if not reply.json().get("choices"):
            return "/v1/completions returned no choices"
        return None

    # ---- bench ------------------------------------------------------------------

    @abstractmethod
    def generate_request(
        self, base_url: str, prompt: str, sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) of one streaming generation request."""

    @abstractmethod
    def chat_request(
        self,
        base_url: str,
        messages: list[list[str]],
        sampling: SamplingParams,
        model: str | None,
    ) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) of one streaming chat request (`messages`: [role, content] pairs)."""

    @abstractmethod
    def replay_request(
        self, base_url: str, body: dict[str, Any], model: str | None
    ) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) replaying a logged OpenAI request body, streamed."""

    def ids_request(
        self, base_url: str, prompt: str | list[int], sampling: SamplingParams, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        """(URL, JSON body) of one non-streamed completion answering with its token ids
        (where `returns_token_ids`)."""
        raise NotImplementedError(f"the {self.name} engine does not answer with token ids")

    @abstractmethod
    def parse_chunk(self, payload: dict[str, Any], text_so_far: str) -> StreamChunk:
        """One `data:` object of the stream, given the text received before it."""

    def response_acceptance(self, response: ResponseStats) -> tuple[float | None, float]:
        """(acceptance length, weight in verify rounds) of one response; (None, 0) if absent."""
        return None, 0.0

    def counter_acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None
    ) -> tuple[float | None, str]:
        """Acceptance from `metrics_path` counters read before and after the run, with a note."""
        return None, self.no_acceptance_note

    counts_drafts: ClassVar[bool] = False  # `draft_counts` answers (chains without a trace)

    def draft_counts(
        self, before: dict[str, float] | None, after: dict[str, float] | None
    ) -> tuple[int, tuple[int, ...]] | None:
        """(rounds drafted, rounds accepted at each draft position) over the run, from the
        counters; what `ddtune.trace.chains` predicts chains from (None: not counted)."""
        return None

    # ---- a trace's replay (`ddtune.trace`) -------------------------------------------

    drafts_every_round: ClassVar[bool] = False  # vLLM: K drafts every round, whatever remains

    def trace_acceptance(self, rounds: Sequence[RoundTrace]) -> float | None:
        """What this engine's acceptance source reports for these rounds (None: it reports none)."""
        return None


def common_launch_options(args: argparse.Namespace) -> dict[str, Any]:
    """The launcher options every engine's command builder takes: port, extra, python, host."""
    return {"port": args.port, "extra": args.extra, "python": args.python, "host": args.host}


def compare_config(expected: dict[str, Any], reported: dict[str, Any]) -> list[str]:
    """One line per expected field the report does not match."""
    return [
        f"{key}: requested {value!r}, server reports {reported.get(key)!r}"
        for key, value in expected.items()
        if reported.get(key) != value
    ]


def process_environ(pid: int) -> dict[str, str]:
    """A process's environment; {} when it is gone or not ours to read."""
    try:
        return dict(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return {}


def process_cmdline(pid: int) -> list[str]:
    """A process's argv; [] when it is gone or not ours to read."""
    try:
        return list(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return []


def flag_value(argv: Sequence[str] | None, names: Sequence[str]) -> str | None:
    """The value of the last `--flag value` / `--flag=value` among `names` in argv."""
    found = None
    items = list(argv or ())
    for i, arg in enumerate(items):
        name, eq, value = arg.partition("=")
        if name not in names:
            continue
        if eq:
            found = value
        elif i + 1 < len(items):
            found = items[i + 1]
    return found


def check_extra(extra: Sequence[str], owned_flags: Sequence[str]) -> None:
    """Refuse extra launch arguments that are one string or that set a flag ddtune owns
    (also by a unique prefix: argparse takes `--speculative-algo` for `--speculative-algorithm`)."""
    if isinstance(extra, str):
        raise UserError("extra arguments must be a list of strings, not one string")
    for arg in extra:
        name = str(arg).split("=", 1)[0]
        owned = name in owned_flags or (
            name.startswith("--")
            and len(name) > 4
            and sum(flag.startswith(name) for flag in owned_flags) == 1
        )
        if owned:
            raise UserError(
                f"{name} is set by ddtune (from the trial's parameters or the service "
                "settings); remove it from the extra arguments"
            )


def is_number(value: Any) -> TypeGuard[float]:
    """An int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)
