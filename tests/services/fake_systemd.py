"""A FAKE `systemctl` and `journalctl` for tests (stdlib only), reproducing documented behaviour.

Installed on PATH as two shell shims (`systemctl`, `journalctl`) that call
`python fake_systemd.py <tool> ARGS`. State lives under $FAKE_SYSTEMD_ROOT:

    units/<unit>           the unit file ([Service] ExecStart, Environment, TimeoutStopSec,
                           KillMode, StartLimitBurst, User, WorkingDirectory)
    units/<unit>.d/*.conf  persistent drop-ins beside the unit (`sweep apply` writes there)
    run/<unit>.d/*.conf    runtime drop-ins (the controller's `systemd_dir` points at run/)
    state/<unit>.json      invocation, start history, result
    state/<unit>.loaded.json  the config as of the last daemon-reload
    state/<inv>.main|.exit main pid and exit status, written by the per-invocation supervisor
    state/<inv>.supervisor the supervisor's pid (it reaps the main process, then writes .exit)
    journal/<inv>.log      stdout/stderr of each invocation

Documented behaviours reproduced:
  * `start` of a Type=simple unit returns as soon as the main process is forked
    (so `restart` returns long before the service is ready);
  * edits to unit files or drop-ins take effect only after `daemon-reload`;
    until then `show -p NeedDaemonReload` says "yes" and `start` warns and uses the old config;
  * more than StartLimitBurst (default 5) starts in StartLimitIntervalSec (10 s) fail with result
    `start-limit-hit` until `reset-failed`;
  * `stop` sends SIGTERM to the control group (KillMode=control-group) or only the
    main process (KillMode=process), waits TimeoutStopSec, then SIGKILLs;
  * drop-ins of both folders apply in the order of their file names; of two with the same
    name the persistent one (beside the unit) wins;
  * `show` reports User, WorkingDirectory and Environment as loaded, and FragmentPath;
  * `cat` prints the unit file and its drop-ins, each after a `# PATH` line;
  * the main process's exit and its ExecMainStatus appear together (systemd updates both on
    SIGCHLD): until the supervisor has written .exit, the unit still reads as active;
  * `Restart=` (no, always, on-success, on-failure, on-abnormal, on-abort) and
    `RestartForceExitStatus=` (a list; an empty assignment resets it) decide whether a main
    process that exits without a `stop` is started again after `RestartSec=` (a new
    invocation; counted against the start limit); `show` reports `Restart`.
Set FAKE_SYSTEMD_BROKEN_RELOAD=1 to make `daemon-reload` do nothing, and
FAKE_SYSTEMD_REAP_DELAY=S to make the supervisor record an exit S seconds late.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(os.environ.get("FAKE_SYSTEMD_ROOT", "/nonexistent"))


def unit_sources(unit: str) -> list[Path]:
    found: dict[str, Path] = {}
    for folder in (ROOT / "run" / f"{unit}.d", ROOT / "units" / f"{unit}.d"):
        found.update({path.name: path for path in folder.glob("*.conf")})
    return [ROOT / "units" / unit, *(found[name] for name in sorted(found))]


def parse_config(unit: str) -> dict:
    """Merge the unit file and drop-ins: Environment accumulates, an empty ExecStart= resets."""
    config: dict = {
        "ExecStart": [],
        "Environment": {},
        "TimeoutStopSec": "90",
        "KillMode": "control-group",
        "StartLimitBurst": "5",
        "Restart": "no",
        "RestartSec": "0.1",
    }
    for path in unit_sources(unit):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if "=" not in line or line.startswith(("#", "[")):
                continue
            key, value = line.split("=", 1)
            if key == "ExecStart":
                config["ExecStart"] = [] if not value else [*config["ExecStart"], value]
            elif key == "RestartForceExitStatus":
                before = config.get(key, "")
                config[key] = f"{before} {value}".strip() if value else ""
            elif key == "Environment":
                config["Environment"].update(item.split("=", 1) for item in shlex.split(value))
            else:
                config[key] = value
    return config


def sources_hash(unit: str) -> str:
    digest = hashlib.sha256()
    for path in unit_sources(unit):
        if path.exists():
            digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


def load_state(unit: str) -> dict:
    path = ROOT / "state" / f"{unit}.json"
    return (
        json.loads(path.read_text())
        if path.exists()
        else {"starts": [], "result": "success", "failed": False}
    )


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` in one step: readers in other processes see the old or the new text, never
    an empty or half-written file. The temp name is per process, so concurrent writers (two
    `daemon-reload`s) cannot move each other's temp file away."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def save_state(unit: str, state: dict) -> None:
    write_atomic(ROOT / "state" / f"{unit}.json", json.dumps(state))


def load_loaded(unit: str) -> dict:
    """What daemon-reload saw: {"hash", "config"} ({} before the first reload)."""
    path = ROOT / "state" / f"{unit}.loaded.json"
    return json.loads(path.read_text()) if path.exists() else {}


def main_pid(inv: str | None) -> int:
    path = ROOT / "state" / f"{inv}.main"
    return int(path.read_text()) if inv and path.exists() else 0


def exit_status(inv: str | None) -> dict | None:
    path = ROOT / "state" / f"{inv}.exit"
    return json.loads(path.read_text()) if inv and path.exists() else None


def supervisor_pid(inv: str | None) -> int:
    path = ROOT / "state" / f"{inv}.supervisor"
    return int(path.read_text()) if inv and path.exists() else 0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def properties(unit: str) -> dict[str, str]:
    state = load_state(unit)
    inv = state.get("invocation")
    pid = main_pid(inv)
    status = exit_status(inv)
    # between the main process's exit and the supervisor's .exit file systemd has not yet
    # handled SIGCHLD: still active, so ExecMainStatus is never read as 0 before it is known
    running = bool(pid) and status is None and (alive(pid) or alive(supervisor_pid(inv)))
    if running:
        active = "active"
    else:
        active = (
            "failed"
            if state.get("failed") or (status and status["code"] != 0 and not state.get("stopped"))
            else "inactive"
        )
    result = state.get("result", "success")
    if status and not state.get("stopped") and status["code"] != 0 and result == "success":
        result = "signal" if status["killed"] else "exit-code"
    config = load_loaded(unit).get("config") or {}
    environment = " ".join(
        shlex.quote(f"{k}={v}") for k, v in config.get("Environment", {}).items()
    )
    return {
        "User": config.get("User", ""),
        "WorkingDirectory": config.get("WorkingDirectory", ""),
        "Environment": environment,
        "FragmentPath": str(ROOT / "units" / unit),
        "LoadState": "loaded" if (ROOT / "units" / unit).exists() else "not-found",
        "NeedDaemonReload": "yes" if load_loaded(unit).get("hash") != sources_hash(unit) else "no",
        "ActiveState": active,
        "SubState": "running" if running else "dead",
        "MainPID": str(pid if running else 0),
        "InvocationID": inv or "",
        "Result": result,
        "ExecMainStatus": str(status["code"]) if status else "0",
        "ExecMainCode": ("2" if status["killed"] else "1") if status else "0",
        "ControlGroup": "",
        "Restart": config.get("Restart", "no"),
    }


def cmd_show(unit: str, props: list[str], value_only: bool) -> int:
    values = properties(unit)
    for prop in props or list(values):
        print(values.get(prop, "") if value_only else f"{prop}={values.get(prop, '')}")
    return 0


def cmd_daemon_reload() -> int:
    if os.environ.get("FAKE_SYSTEMD_BROKEN_RELOAD"):
        return 0
    for path in (ROOT / "units").iterdir():
        if path.is_dir():  # <unit>.d: drop-ins, read with their unit
            continue
        loaded = {"hash": sources_hash(path.name), "config": parse_config(path.name)}
        write_atomic(ROOT / "state" / f"{path.name}.loaded.json", json.dumps(loaded))
    return 0


def cmd_start(unit: str) -> int:
    state = load_state(unit)
    if properties(unit)["ActiveState"] == "active":
        return 0
    if load_loaded(unit).get("hash") != sources_hash(unit):
        print(
            f"Warning: The unit file, source configuration file or drop-ins of {unit} changed on disk. "
            "Run 'systemctl daemon-reload' to reload units.",
            file=sys.stderr,
        )
    config = load_loaded(unit).get("config") or parse_config(unit)
    now = time.time()
    interval = float(config.get("StartLimitIntervalSec", "10").rstrip("s"))
    starts = [t for t in state["starts"] if now - t < interval]
    if len(starts) >= int(config["StartLimitBurst"]):
        state.update(result="start-limit-hit", failed=True)
        save_state(unit, state)
        print(
            f'Job for {unit} failed. See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.',
            file=sys.stderr,
        )
        return 1
    inv = uuid.uuid4().hex
    state.update(
        starts=[*starts, now], invocation=inv, result="success", failed=False, stopped=False
    )
    save_state(unit, state)
    subprocess.Popen(
        [sys.executable, "-S", __file__, "supervise", unit, inv],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not main_pid(inv):  # Type=simple: ready as soon as the main process exists
        time.sleep(0.01)
    return 0


def cmd_supervise(unit: str, inv: str) -> int:
    """The per-invocation 'service manager': run ExecStart, record pid and exit status."""
    config = load_loaded(unit).get("config") or parse_config(unit)
    argv = shlex.split(config["ExecStart"][-1].replace("%%", "%").replace("$$", "$"))
    env = {**os.environ, **config["Environment"], "INVOCATION_ID": inv}
    env.pop("FAKE_SYSTEMD_ROOT", None)
    write_atomic(ROOT / "state" / f"{inv}.supervisor", str(os.getpid()))
    with open(ROOT / "journal" / f"{inv}.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    write_atomic(ROOT / "state" / f"{inv}.main", str(proc.pid))  # `start` polls for it
    code = proc.wait()
    time.sleep(float(os.environ.get("FAKE_SYSTEMD_REAP_DELAY", "0")))  # widen the SIGCHLD window
    status = {"code": -code if code < 0 else code, "killed": code < 0}
    write_atomic(ROOT / "state" / f"{inv}.exit", json.dumps(status))
    if restarts(unit, config, status):
        time.sleep(float(config.get("RestartSec", "0.1").rstrip("s")))
        state = load_state(unit)
        if not state.get("stopped") and state.get("invocation") == inv:
            cmd_start(unit)  # the service manager's own restart: a new invocation
    return 0


def restarts(unit: str, config: dict, status: dict) -> bool:
    """Would systemd start the unit again after this exit (no `stop` asked for it)?"""
    if load_state(unit).get("stopped"):
        return False
    code, killed = status["code"], status["killed"]
    forced = config.get("RestartForceExitStatus", "").split()
    if not killed and str(code) in forced:
        return True
    clean = code == 0 and not killed
    return {
        "always": True,
        "on-success": clean,
        "on-failure": not clean,
        "on-abnormal": killed,
        "on-abort": killed,
    }.get(config.get("Restart", "no"), False)


def cmd_stop(unit: str) -> int:
    state = load_state(unit)
    inv = state.get("invocation")
    pid = main_pid(inv)
    state["stopped"] = True
    save_state(unit, state)
    if not pid or exit_status(inv) is not None:
        return 0
    config = load_loaded(unit).get("config") or parse_config(unit)
    group = config["KillMode"] == "control-group"
    send = (lambda sig: os.killpg(pid, sig)) if group else (lambda sig: os.kill(pid, sig))
    try:
        send(signal.SIGTERM)
        deadline = time.monotonic() + float(config["TimeoutStopSec"].rstrip("s"))
        while exit_status(inv) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if exit_status(inv) is None:
            send(signal.SIGKILL)
    except ProcessLookupError:
        pass
    while exit_status(inv) is None:
        time.sleep(0.02)
    return 0


def cmd_reset_failed(unit: str) -> int:
    state = load_state(unit)
    state.update(starts=[], result="success", failed=False)
    save_state(unit, state)
    return 0


def cmd_cat(unit: str) -> int:
    """`systemctl cat`: each source file as `# PATH` and its text; none: systemd's message."""
    found = [path for path in unit_sources(unit) if path.exists()]
    if not found:
        print(f"No files found for {unit}.", file=sys.stderr)
        return 1
    for path in found:
        print(f"# {path}\n{path.read_text()}")
    return 0


def systemctl(args: list[str]) -> int:
    props = [p for a in args if a.startswith("--property=") for p in a.split("=", 1)[1].split(",")]
    for i, a in enumerate(args):
        if a == "-p":
            props += args[i + 1].split(",")
    words = [
        a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-p")
    ]
    verb, units = words[0], words[1:]
    if verb == "daemon-reload":
        return cmd_daemon_reload()
    if verb == "show":
        return cmd_show(units[0], props, "--value" in args)
    if verb == "restart":
        cmd_stop(units[0])
        return cmd_start(units[0])
    if verb == "cat":
        return cmd_cat(units[0])
    if verb == "is-active":
        state = properties(units[0])["ActiveState"]
        print(state)
        return 0 if state == "active" else 3
    handlers = {"start": cmd_start, "stop": cmd_stop, "reset-failed": cmd_reset_failed}
    return handlers[verb](units[0])


def journalctl(args: list[str]) -> int:
    invs = [a.split("=", 1)[1] for a in args if a.startswith("_SYSTEMD_INVOCATION_ID=")]
    if "-u" in args:
        invs = [load_state(args[args.index("-u") + 1]).get("invocation") or ""]
    for inv in invs:
        path = ROOT / "journal" / f"{inv}.log"
        if path.exists():
            sys.stdout.write(path.read_text(errors="replace"))
    return 0


def install(bin_dir: Path, root: Path) -> None:
    """Write the `systemctl`/`journalctl` shims into bin_dir and the state layout into root."""
    for sub in ("units", "run", "state", "journal"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("systemctl", "journalctl"):
        shim = bin_dir / tool
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{__file__}" {tool} "$@"\n')
        shim.chmod(0o755)


if __name__ == "__main__":
    tool, rest = sys.argv[1], sys.argv[2:]
    if tool == "supervise":
        sys.exit(cmd_supervise(*rest))
    sys.exit(systemctl(rest) if tool == "systemctl" else journalctl(rest))
