"""Where a running service's launch command comes from: a systemd unit, or an argv.

    source = from_unit("sglang-kimi.service")   # `systemctl cat` of a bare name
    source = from_unit("./sglang-kimi.service") # a path (with a `/`) is read as a file
    source = from_command(["python", "-m", "sglang.launch_server", ...])
    source.argv, source.env, source.unit         # what `sweep init` parses

A unit's `ExecStart=` is read with its continuation lines (a trailing `\\`),
its prefixes (`-`, `@`, `+`, `!`) dropped, and the last assignment wins (an
empty `ExecStart=` in a drop-in resets it, as systemd does); `Environment=`
lines accumulate; `User=`, `WorkingDirectory=` and `Restart=` are kept for the notes.
Specifiers such as `%i` and `$VAR` references are kept as written.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ddtune.errors import UserError

SYSTEMCTL_TIMEOUT_S = 30
EXEC_PREFIXES = "-@+!:|"


@dataclass(frozen=True)
class LaunchSource:
    """A launch command as the service runs it today, and where it was read."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    unit: str | None = None  # the systemd unit's name; None: a plain command
    user: str = ""
    working_directory: str = ""
    origin: str = "the command line"  # what the spec's comments name as its source
    restart: str = ""  # the unit's Restart= ("" where it sets none: systemd's "no")


def from_command(argv: Sequence[str]) -> LaunchSource:
    """A launch command given as words (`sweep init --from-command -- ARGV...`)."""
    words = tuple(argv)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UserError("--from-command needs the launch command after `--`")
    return LaunchSource(words, origin="the command line")


def from_unit(name_or_file: str) -> LaunchSource:
    """A systemd unit: a path (with a `/`, e.g. `./x.service`) is read as a file; a bare
    name is always the live unit (`systemctl cat`), never a file of that name here."""
    if "/" in name_or_file:
        path = Path(name_or_file)
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise UserError(f"--from-unit {name_or_file}: {exc.strerror or exc}") from None
        return parse_unit(text, path.name, f"the unit file {path}")
    unit = name_or_file if "." in name_or_file else name_or_file + ".service"
    text, origin = _systemctl_cat(unit), f"the systemd unit {unit} (systemctl cat)"
    return parse_unit(text, unit, origin)


def parse_unit(text: str, unit: str, origin: str) -> LaunchSource:
    """The `[Service]` settings of a unit file's text (drop-ins included, in order)."""
    exec_start: str | None = None
    env: dict[str, str] = {}
    user = working_directory = restart = ""
    for section, key, value in _assignments(text):
        if section != "Service":
            continue
        if key == "ExecStart":
            exec_start = value.strip() or None  # an empty assignment resets it
        elif key == "Environment":
            env.update(_environment(value))
        elif key == "User":
            user = value.strip()
        elif key == "WorkingDirectory":
            working_directory = value.strip().lstrip("-")
        elif key == "Restart":
            restart = value.strip()
    if exec_start is None:
        raise UserError(f"{origin} has no ExecStart= in its [Service] section")
    argv = shlex.split(exec_start.lstrip(EXEC_PREFIXES))
    if not argv:
        raise UserError(f"{origin}: its ExecStart= is empty")
    return LaunchSource(tuple(argv), env, unit, user, working_directory, origin, restart)


def _systemctl_cat(unit: str) -> str:
    try:
        done = subprocess.run(
            ["systemctl", "cat", "--no-pager", unit],
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise UserError(
            f"--from-unit {unit}: systemctl is not installed here; pass the unit's file as a "
            f"path instead (e.g. ./{unit})"
        ) from None
    except subprocess.TimeoutExpired:
        raise UserError(f"--from-unit {unit}: systemctl cat did not answer") from None
    if done.returncode != 0 or not done.stdout.strip():
        said = " ".join(done.stderr.split()) or f"exit code {done.returncode}"
        here = f"; to read the file {unit} here, pass ./{unit}" if Path(unit).is_file() else ""
        raise UserError(f"--from-unit {unit}: systemctl cat found no such unit ({said}){here}")
    return done.stdout


def _assignments(text: str) -> Iterator[tuple[str, str, str]]:
    """(section, key, value) of each assignment; continuation lines joined."""
    section, pending = "", ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith(("#", ";"))):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            key, _, value = line.partition("=")
            yield section, key.strip(), value.strip()


def _environment(value: str) -> dict[str, str]:
    """`Environment="A=1" B=2`: space-separated, each word optionally quoted."""
    return dict(word.split("=", 1) for word in shlex.split(value) if "=" in word)


__all__ = ["LaunchSource", "from_command", "from_unit", "parse_unit"]
