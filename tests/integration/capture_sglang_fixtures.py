"""Regenerate tests/engines/fixtures/sglang_* from a real SGLang (run it for each new release).

    .venv/bin/python tests/integration/capture_sglang_fixtures.py

Builds or reuses `.venv-sglang` (`sglang_setup.py`), then records, from the
real package on this CPU:

    sglang_engine_info.json           the argument probe's `info` reply: version and every
                                      option string of SGLang's parser -> its field
    sglang_server_info_ar.json        GET /server_info of a live AR server (CPU recipe,
                                      --max-running-requests 3, --enable-metrics)
    sglang_get_server_info_ar.json    GET /get_server_info of the same server (deprecated)
    sglang_model_info.json            GET /model_info
    sglang_generate_stream_ar.txt     the SSE body of a streamed POST /generate
    sglang_metrics_ar.txt             GET /metrics after that request (the sglang:spec_* and
                                      sglang:generation_tokens families only)
    sglang_resolved_dflash_w64.json   the resolved server args of a DFLASH launch with
                                      window 64 (parser dry run with --device cuda: DFLASH
                                      resolves only for cuda/npu/xpu; no server can run it here)

and DERIVES from them (no server can run these modes on this CPU):

    sglang_server_info_dflash_w64.json      the AR /server_info with every speculative_*
                                            field of the DFLASH dry run
    sglang_server_info_ddtree_b8_w64.json   that, as the DDTree PR would report it:
                                            speculative_algorithm DDTREE and its
                                            speculative_ddtree_budget 8

    sglang_server_info_<method>.json        the AR /server_info with every speculative_*
                                            field SGLang resolves for each method of
                                            `METHOD_FIXTURES` (its flags rendered by
                                            `ddtune.methods.sglang_flags`; dry run, --device cuda)

The repository root in recorded paths becomes `/repo`. Nothing is edited by hand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from sglang_setup import CPU_FLAGS, DRAFTER, REPO, TARGET, cpu_env, ensure_sglang_venv  # noqa: E402
from vllm_setup import free_port, nice_prefix  # noqa: E402

from ddtune.engines.parser_probe import EngineProbe  # noqa: E402
from ddtune.methods import MethodConfig, sglang_flags  # noqa: E402

FIXTURES = REPO / "tests" / "engines" / "fixtures"
KEPT_METRICS = ("sglang:spec_", "sglang:generation_tokens")
RESOLVE = """
import json, sys
from sglang.srt.server_args import prepare_server_args
args = prepare_server_args(sys.argv[1:])
args.resolve_once()
print(json.dumps(args.resolved_dict(), default=str))
"""
# the configs of tests/engines/test_methods_readback.py: one per method SGLang runs besides AR
METHOD_FIXTURES = {
    "eagle": {"num_steps": 3, "topk": 4, "num_draft_tokens": 8, "drafter": str(DRAFTER)},
    "eagle3": {"num_steps": 3, "topk": 1, "drafter": str(DRAFTER)},
    "mtp": {"num_steps": 2, "topk": 1},
    "ngram": {"num_draft_tokens": 8, "max_bfs_breadth": 4},
    "dflash": {"block_size": 8, "drafter": str(DRAFTER)},
}


def scrub(text: str) -> str:
    return text.replace(str(REPO), "/repo")


def write(name: str, data: object) -> None:
    text = data if isinstance(data, str) else json.dumps(data, indent=1, sort_keys=True) + "\n"
    (FIXTURES / name).write_text(scrub(text))
    print(f"wrote tests/engines/fixtures/{name}")


def engine_info(python: Path) -> None:
    env = {**os.environ, **cpu_env()}
    with EngineProbe("sglang", str(python), env=env, cwd=REPO) as probe:
        info = probe.info()
    write(
        "sglang_engine_info.json",
        {"engine": info.engine, "version": info.version, "options": dict(info.options)},
    )


def resolve(python: Path, flags: list[str]) -> dict[str, object]:
    """SGLang's own resolution of a CUDA launch with these flags (no server, no GPU)."""
    argv = ["--model-path", str(TARGET), "--device", "cuda", *flags]
    done = subprocess.run(
        [str(python), "-c", RESOLVE, *argv],
        env={**os.environ, **cpu_env()},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    resolved: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return resolved


def resolved_methods(python: Path) -> None:
    """Each `METHOD_FIXTURES` config's resolved speculative_* args, and its /server_info."""
    ar = json.loads((FIXTURES / "sglang_server_info_ar.json").read_text())
    for name, knobs in METHOD_FIXTURES.items():
        config = MethodConfig.build(name, knobs)
        resolved = resolve(python, sglang_flags(config, None, None))
        speculative = {k: v for k, v in resolved.items() if k.startswith("speculative_")}
        write(f"sglang_server_info_{name}.json", {**ar, **speculative})


def resolved_dflash(python: Path) -> None:
    argv = ["--model-path", str(TARGET), "--device", "cuda", "--speculative-algorithm", "DFLASH"]
    argv += [
        "--speculative-draft-model-path",
        str(DRAFTER),
        "--speculative-draft-window-size",
        "64",
    ]
    done = subprocess.run(
        [str(python), "-c", RESOLVE, *argv],
        env={**os.environ, **cpu_env()},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    write("sglang_resolved_dflash_w64.json", json.loads(done.stdout.splitlines()[-1]))


def live_server(python: Path) -> None:
    port = free_port()
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", str(TARGET), *CPU_FLAGS]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--enable-metrics"]
    argv += ["--max-running-requests", "3"]
    log = open(FIXTURES.parent / "sglang_capture.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [*nice_prefix(), *argv],
        env={**os.environ, **cpu_env()},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        record(f"http://127.0.0.1:{port}", server)
    finally:
        os.kill(server.pid, signal.SIGTERM)  # the launcher alone: it takes its children down
        server.wait(timeout=120)
        log.close()
        (FIXTURES.parent / "sglang_capture.log").unlink()


def record(base: str, server: subprocess.Popen) -> None:
    with httpx.Client(timeout=120, trust_env=False) as client:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if client.get(base + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit("SGLang did not become healthy; see tests/engines/sglang_capture.log")
        write("sglang_server_info_ar.json", client.get(base + "/server_info").json())
        write("sglang_get_server_info_ar.json", client.get(base + "/get_server_info").json())
        write("sglang_model_info.json", client.get(base + "/model_info").json())
        body = {
            "text": "def add(a, b):",
            "sampling_params": {"max_new_tokens": 8, "temperature": 0},
        }
        stream = client.post(base + "/generate", json={**body, "stream": True})
        write("sglang_generate_stream_ar.txt", stream.text)
        write("sglang_metrics_ar.txt", metric_families(client.get(base + "/metrics").text))


def metric_families(text: str, keep: tuple[str, ...] = KEPT_METRICS) -> str:
    """The lines of the Prometheus families whose name starts with one of `keep`."""
    lines = []
    for line in text.splitlines():
        name = line.split()[2] if line.startswith("# ") and len(line.split()) > 2 else line
        if name.startswith(keep):
            lines.append(line)
    return "\n".join(lines) + "\n"


def derive() -> None:
    """The DFLASH and DDTREE replies, from the AR reply and the DFLASH dry run."""
    ar = json.loads((FIXTURES / "sglang_server_info_ar.json").read_text())
    resolved = json.loads((FIXTURES / "sglang_resolved_dflash_w64.json").read_text())
    speculative = {k: v for k, v in resolved.items() if k.startswith("speculative_")}
    dflash = {**ar, **speculative}
    write("sglang_server_info_dflash_w64.json", dflash)
    ddtree = {**dflash, "speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8}
    write("sglang_server_info_ddtree_b8_w64.json", ddtree)


def main() -> None:
    python = ensure_sglang_venv()
    engine_info(python)
    resolved_dflash(python)
    live_server(python)
    derive()
    resolved_methods(python)


if __name__ == "__main__":
    main()
