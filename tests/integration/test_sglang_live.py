"""Slow, live: `ddtune sweep run examples/sglang-cpu.toml` against the real SGLang 0.5.23.

`.venv-sglang` is built on first use (`sglang_setup.py`: torch 2.13.0 first, sglang
--no-deps, pinned pure-Python dependencies, two named workarounds). Then, as a user would,
from the repository root:

  1. the engine check, live: a misspelled flag and a DFLASH config make `sweep run` exit 2
     with SGLang's own messages, before anything starts (no store, no attempt folder, no
     service log, nothing listening on the port);
  2. the sweep: --max-running-requests 2 and 3 against a baseline of 8, a fresh SGLang
     process per config through the process controller; every trial READY with a verified
     identity (/server_info's launch_command is the new process's own argv: its
     --max-running-requests; version 0.5.23), benched, the report renders;
  3. `sweep apply --config 'ar mrr=3'`: the exact command printed; run as printed it
     serves a READY SGLang whose /server_info and process satisfy the sglang kind's
     readiness check for that config; `--revert` says there is nothing to revert for a
     process service.

Prints the timings (docs/engines.md has them).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ddtune.engines import Launch, get_engine
from ddtune.params import DecodeParams
from ddtune.services import procs
from ddtune.sweep.plan import read_spec
from ddtune.sweep.store.db import Store

sys.path.insert(0, str(Path(__file__).parent))
from sglang_setup import ensure_sglang_venv  # noqa: E402
from vllm_setup import DDTUNE, REPO, free_port, nice_prefix, sweep_report, sweep_run  # noqa: E402

EXAMPLE = REPO / "examples" / "sglang-cpu.toml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]


def example(folder: Path, port: int, edit: tuple[str, str] | None = None) -> Path:
    """The example on a free port (and one text edit), written into `folder`."""
    text, count = re.subn(r"^port = 30130$", f"port = {port}", EXAMPLE.read_text(), flags=re.M)
    assert count == 1, "the example's port line changed; update this test"
    if edit is not None:
        assert edit[0] in text, edit
        text = text.replace(*edit)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / EXAMPLE.name
    path.write_text(text)
    return path


def ddtune(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    argv = [*nice_prefix(), str(DDTUNE), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_live_sglang_sweep_with_engine_check_and_apply(tmp_path):
    started = time.monotonic()
    ensure_sglang_venv()
    print(f"\nSGLang venv ready in {time.monotonic() - started:.1f} s")
    port = free_port()

    # 1. refused before anything starts, with SGLang's own messages
    misspelled = example(
        tmp_path / "bad", port, ('"--max-running-requests"', '"--max-runing-requests"')
    )
    dflash = example(tmp_path / "dflash", port, ('mode = ["ar"]', 'mode = ["ar", "dflash"]'))
    for spec, expected in (
        (
            misspelled,
            "service.command (--max-runing-requests): SGLang 0.5.23 refused it at "
            "argparse: unrecognized arguments: --max-runing-requests",
        ),
        (
            dflash,
            "mode (--speculative-algorithm): SGLang 0.5.23 refused it at resolve: "
            "ValueError: DFLASH speculative decoding is not supported by CpuSRTPlatform on device 'cpu'.",
        ),
    ):
        store = spec.parent / "store" / "store.sqlite"
        began = time.monotonic()
        run = ddtune("sweep", "run", str(spec), "--store", str(store))
        print(f"refused in {time.monotonic() - began:.1f} s: {run.stderr.splitlines()[1:]}")
        assert run.returncode == 2, run.stdout + run.stderr
        lines = run.stderr.strip().splitlines()
        assert lines[0].startswith("ddtune: error: the engine refused")
        assert any(expected in line for line in lines[1:]), lines
        assert not store.parent.exists()  # no store, no attempt folder, no service.log
        assert not procs.port_listeners(port)  # nothing was started

    # 2. the sweep
    spec_path = example(tmp_path / "sweep", port)
    spec = read_spec(spec_path)
    store_path = tmp_path / "sweep" / "store.sqlite"
    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    print(f"SGLang sweep: {elapsed:.0f} s for {len(spec.all_configs())} trials")
    store = Store(store_path, create=False)
    sweep_id = store.sweep_row(spec.name)["id"]
    for trial in store.trials(sweep_id):
        assert trial["status"] == "done", (trial["label"], trial["status"])
        attempt = store.attempts(trial["id"])[-1]
        identity = json.loads(attempt["identity_json"])
        mrr = json.loads(trial["config_json"])["mrr"]
        assert identity["version"] == "0.5.23", identity
        assert identity["server_info"]["speculative_algorithm"] is None
        assert f"--max-running-requests {mrr}" in identity["server_info"]["launch_command"]
        timings = json.loads(attempt["timings_json"])
        print(f"  {trial['label']}: start to READY {timings.get('start_to_ready_s')} s")
    records = store.trial_records(sweep_id)
    assert all(r.metrics.get("short_tps") for r in records), [r.metrics for r in records]
    assert all(r.metrics.get("acceptance_length") is None for r in records)  # AR: no speculation
    store.close()
    report = sweep_report(store_path, tmp_path / "report")
    assert report.returncode == 0, report.stderr[-4000:]
    assert "mrr=3" in (tmp_path / "report" / "report.html").read_text()

    # 3. apply: the printed command serves a READY SGLang with that config
    applied = ddtune("sweep", "apply", "--store", str(store_path), "--config", "ar mrr=3")
    assert applied.returncode == 0, applied.stderr
    command = applied.stderr.split("serve it with (in .):\n", 1)[1].split("\nwhich runs:", 1)[0]
    print(f"apply printed: {command}")
    check_printed_command(command.strip(), port)
    reverted = ddtune("sweep", "apply", "--store", str(store_path), "--revert")
    assert reverted.returncode == 0 and "nothing to revert" in reverted.stderr


def check_printed_command(command: str, port: int) -> None:
    """Run `command` as printed (shell words, from the repo root); READY by the kind's checks."""
    words = shlex.split(command)
    env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    argv = words[len(env) :]
    began = time.monotonic()
    server = subprocess.Popen(
        [*nice_prefix(), *argv],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        info = wait_ready(port, server)
        print(f"the printed command was READY in {time.monotonic() - began:.1f} s")
        # nice and the launcher exec: the process started is SGLang's main process itself
        launch = Launch(main_pid=server.pid, argv=argv)
        assert get_engine("sglang").config_mismatches(DecodeParams("ar"), info, launch) == []
        assert info["max_running_requests"] == 3
    finally:
        server.send_signal(signal.SIGTERM)  # the launcher alone: it takes its children down
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def wait_ready(port: int, server: subprocess.Popen, timeout: float = 900.0) -> dict:
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=30, trust_env=False) as client:
        while time.monotonic() < deadline:
            assert server.poll() is None, f"the printed command exited with {server.returncode}"
            try:
                if client.get(base + "/health_generate").status_code == 200:
                    return client.get(base + "/server_info").json()
            except httpx.HTTPError:
                pass
            time.sleep(1)
    raise AssertionError(f"SGLang was not READY on {port} within {timeout} s")
