"""The engine's own argument check: its parser, run in its Python, without loading a model.

    with EngineProbe("sglang", "/opt/sglang/bin/python", env=env, cwd=cwd) as probe:
        info = probe.info()              # EngineInfo: version, every option -> its field
        verdict = probe.check(command)   # Verdict: accepted, or the stage and the engine's message
    flag, parameter = attribute(command, verdict)

One engine process answers every check of a sweep (SGLang's import alone takes
about 5 s): the probe program of `ddtune.engines.probes` runs as
`PYTHON -c PROGRAM` and speaks JSON lines on its stdin/stdout; what the engine
logs goes to a temporary file whose tail explains a probe that died. `user`
runs it as another user (a systemd unit's `User=`; needs root). A
`ProbeError` means the check itself could not run (no such interpreter, the
engine does not import, a timeout): that is not the engine's verdict.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import selectors
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ddtune.engines.probes import probe_source

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
STDERR_TAIL_CHARS = 1500


class ProbeError(Exception):
    """The engine's check could not run; the message says why (and what the engine printed)."""


@dataclass(frozen=True)
class EngineInfo:
    """What the probe learned about the engine before any check."""

    engine: str
    version: str | None
    options: Mapping[str, str]  # every option string of the engine's parser -> its field
    python: str
    user: str

    def name(self) -> str:
        """E.g. `SGLang 0.5.23`."""
        return f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.version or '(version unknown)'}"

    def has(self, flag: str) -> bool:
        """Whether the parser knows `flag` exactly (argparse would also take a prefix of it)."""
        return flag in self.options


@dataclass(frozen=True)
class EngineCommand:
    """A launch command as the engine reads it: `python -m module args` in its environment.

    `env` is what the launch adds to the environment; `origins` names the
    parameter that makes ddtune emit a flag or variable (`budget`, `topk`, ...),
    `value_origins` the parameter or user variable a flag's value comes from
    (`vars.mrr`), so a refusal can say which setting caused it; `checked_env`
    are the variables set from parameters, which the engine must know (else they
    would be ignored).
    """

    python: str
    module: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)
    value_origins: Mapping[str, str] = field(default_factory=dict)
    checked_env: tuple[str, ...] = ()

    def flags(self) -> list[tuple[str, str | None]]:
        """(flag, value) pairs of `args`: `--x v`, `--x=v` or a switch (value None)."""
        pairs: list[tuple[str, str | None]] = []
        items = list(self.args)
        for i, arg in enumerate(items):
            if not arg.startswith("-") or _is_number(arg):
                continue
            name, eq, value = arg.partition("=")
            nxt = items[i + 1] if i + 1 < len(items) else None
            if eq:
                pairs.append((name, value))
            elif nxt is not None and (not nxt.startswith("-") or _is_number(nxt)):
                pairs.append((name, nxt))
            else:
                pairs.append((name, None))
        return pairs


@dataclass(frozen=True)
class Verdict:
    """The engine's answer on one command: accepted, or the stage and its own message."""

    accepted: bool
    stage: str
    message: str = ""
    flag: str | None = None  # named by the probe itself (e.g. an environment variable)

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any]) -> Verdict:
        return cls(
            bool(reply.get("accepted")),
            str(reply.get("stage") or "?"),
            one_line(str(reply.get("message") or "")),
            reply.get("flag") or None,
        )


class EngineProbe:
    """One engine process checking launch commands; a context manager (see the module doc)."""

    def __init__(
        self,
        engine: str,
        python: str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        user: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.engine, self.python, self.timeout = engine, python, timeout
        self.env = dict(os.environ if env is None else env)
        self.cwd, self.user = cwd, user
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buffer = b""

    def __enter__(self) -> EngineProbe:
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                [self.python, "-c", probe_source(self.engine)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                **run_as(self.user, self.env),
            )
        except OSError as exc:
            self.close()
            raise ProbeError(f"cannot run {self.python}: {exc.strerror or exc}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> EngineInfo:
        reply = self._ask({"op": "info"})
        return EngineInfo(
            engine=str(reply.get("engine") or self.engine),
            version=reply.get("version"),
            options=dict(reply.get("options") or {}),
            python=str(reply.get("python") or self.python),
            user=str(reply.get("user") or "?"),
        )

    def check(self, command: EngineCommand) -> Verdict:
        request = {
            "op": "check",
            "args": list(command.args),
            "env": dict(command.env),
            "check_env": list(command.checked_env),
        }
        return Verdict.from_reply(self._ask(request))

    def close(self) -> None:
        """End the engine process (stdin closed, then killed if it lingers)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # ---- the JSON-lines exchange ------------------------------------------------

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ProbeError("the engine probe is not running")
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
        except BrokenPipeError:
            raise ProbeError(self._died("exited")) from None
        reply = json.loads(self._readline(time.monotonic() + self.timeout))
        if not isinstance(reply, dict):
            raise ProbeError(f"the engine probe answered {reply!r}")
        if "error" in reply:
            raise ProbeError(f"{ENGINE_NAMES.get(self.engine, self.engine)}: {reply['error']}")
        return reply

    def _readline(self, deadline: float) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise ProbeError(self._died(f"did not answer within {self.timeout:.0f} s"))
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ProbeError(self._died("exited"))
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _died(self, what: str) -> str:
        """`PYTHON <what> (code N): <the tail of what it printed>`."""
        code = self._proc.poll() if self._proc is not None else None
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace")[-STDERR_TAIL_CHARS:]
        status = f" (code {code})" if code is not None else ""
        last = one_line(tail.strip().splitlines()[-1]) if tail.strip() else "(no output)"
        return f"the {self.engine} argument probe in {self.python} {what}{status}: {last}"


def run_as(user: str | None, env: dict[str, str]) -> dict[str, Any]:
    """Popen keywords that run a child as `user` (root only); sets HOME/USER/LOGNAME in `env`."""
    if not user or user == pwd.getpwuid(os.geteuid()).pw_name or os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(user)
    env.update(HOME=entry.pw_dir, USER=user, LOGNAME=user)
    groups = os.getgrouplist(user, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": groups}


def attribute(command: EngineCommand, verdict: Verdict) -> tuple[str | None, str | None]:
    """(the flag or variable a refusal is about, the parameter behind it).

    The probe's own `flag` first; else the first flag of the command the message
    names; else the flag whose value the message names (a parameter's before a
    fixed argument's, e.g. `DDTREE` -> `--speculative-algorithm`). A flag the
    parser does not know is its name's fault, not its value's: then only the
    parameter that made ddtune emit it counts.
    """
    flag = verdict.flag or _named_flag(command, verdict.message)
    flag = flag or _named_value(command, verdict.message)
    if flag is None:
        return None, None
    if "unrecognized arguments" in verdict.message:
        return flag, command.origins.get(flag)
    return flag, command.origins.get(flag) or command.value_origins.get(flag)


def _named_flag(command: EngineCommand, message: str) -> str | None:
    flags = {name for name, _ in command.flags()}
    for token in re.findall(r"--[A-Za-z0-9][A-Za-z0-9_-]*", message):
        if token in flags:
            return token
    return None


def _named_value(command: EngineCommand, message: str) -> str | None:
    named = [
        name
        for name, value in command.flags()
        if value and any(_mentions(message, word) for word in _words_of(value))
    ]
    by_parameter = [n for n in named if n in command.origins or n in command.value_origins]
    found = by_parameter or named
    return found[0] if found else None


def _words_of(value: str) -> list[str]:
    """A flag's value as the message may name it: itself, or the keys of a JSON object
    (vLLM's `--speculative-config '{"num_speculative_tokens": 0}'`)."""
    if value.startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return [str(key) for key in parsed]
    return [value] if len(value) > 1 else []


def _mentions(message: str, word: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(word)}(?![\w/.-])", message) is not None


def one_line(text: str, limit: int = 400) -> str:
    """Whitespace folded to single spaces, cut at `limit` characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = [
    "EngineCommand",
    "EngineInfo",
    "EngineProbe",
    "ProbeError",
    "Verdict",
    "attribute",
    "one_line",
]
