"""Slow: ddtune's SGLang launch commands through the real SGLang 0.5.23 parser (no model loaded).

`.venv-sglang` is built on first use (`sglang_setup.py`). One engine process (the
preflight's probe) parses and resolves the command `python -m ddtune.launchers sglang`
builds for ar / dflash / ddtree x window none / 64:

  * `--device cuda` (the GPU dry run: resolution checks DFLASH against the drafter's
    config without touching a device): ar and dflash accepted, with window 64 too; ddtree
    refused by SGLang's parser (`--speculative-ddtree-budget`: the DDTree pull request is
    not merged), the message asserted;
  * `--device cpu` (how the live test serves): dflash refused at resolution with SGLang's
    "not supported by CpuSRTPlatform" message.

Then the readiness fields: each field the SGLang kind reads is a destination of 0.5.23's
parser and is reported by a real `/server_info` answer (the live test's, recorded).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from ddtune.engines.parser_probe import EngineProbe
from ddtune.engines.sglang import REPORTED_FIELDS, WINDOW_FIELD
from ddtune.params import DecodeParams
from ddtune.services import ServiceSpec
from ddtune.services.engine_check import PlannedLaunch, check_launches

sys.path.insert(0, str(Path(__file__).parent))
from sglang_setup import DRAFTER, REPO, TARGET, cpu_env, ensure_sglang_venv  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
FIXTURES = REPO / "tests" / "engines" / "fixtures"
PARAMS = [
    DecodeParams(mode, budget=8, topk=4, window=window)
    for mode in ("ar", "dflash", "ddtree")
    for window in (None, 64)
]
LAUNCHES = [PlannedLaunch(p.canonical().label(), p) for p in PARAMS]


def spec(python: Path, device: str) -> ServiceSpec:
    command = [sys.executable, "-m", "ddtune.launchers", "sglang", "--python", str(python)]
    command += ["--model-path", str(TARGET), "--draft-model-path", str(DRAFTER)]
    command += ["--mode", "{mode}", "--budget", "{budget}", "--topk", "{topk}"]
    command += ["--window", "{window}", "--port", "{port}", "--", "--device", device]
    return ServiceSpec.from_dict(
        {"engine": "sglang", "command": command, "env": cpu_env(), "port": 30000}
    )


def test_ddtunes_commands_through_sglangs_own_parser(tmp_path):
    started = time.monotonic()
    python = ensure_sglang_venv()
    print(f"\nSGLang venv ready in {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    gpu = check_launches(spec(python, "cuda"), LAUNCHES, tmp_path)
    print(f"{gpu.summary()} (wall {time.monotonic() - started:.1f} s)")
    print("\n".join(gpu.lines()[1:]))
    assert gpu.engine is not None and gpu.engine.version == "0.5.23"
    assert gpu.checked == 6
    refused = {r.label: r for r in gpu.refusals}
    assert sorted(refused) == ["ddtree b8 k4 w64", "ddtree b8 k4 wnone"]  # ar, dflash: accepted
    for refusal in refused.values():
        assert (refusal.stage, refusal.parameter, refusal.flag) == (
            "argparse",
            "budget",
            "--speculative-ddtree-budget",
        )
        assert refusal.message.startswith("unrecognized arguments: --speculative-ddtree-budget 8")

    started = time.monotonic()
    cpu = check_launches(spec(python, "cpu"), LAUNCHES[:4], tmp_path)
    print(f"{cpu.summary()} (wall {time.monotonic() - started:.1f} s)")
    assert [r.label for r in cpu.refusals] == ["dflash wnone", "dflash w64"]
    assert {r.line().split(": ", 1)[1] for r in cpu.refusals} == {
        "mode (--speculative-algorithm): SGLang 0.5.23 refused it at resolve: ValueError: "
        "DFLASH speculative decoding is not supported by CpuSRTPlatform on device 'cpu'."
    }


def test_the_readiness_fields_are_sglangs_own(tmp_path):
    python = ensure_sglang_venv()
    with EngineProbe("sglang", str(python), env={**os.environ, **cpu_env()}) as probe:
        info = probe.info()
    fields = set(info.options.values())
    reported = json.loads((FIXTURES / "sglang_server_info_ar.json").read_text())
    assert reported["version"] == info.version == "0.5.23"
    for field in REPORTED_FIELDS:
        if field == "speculative_ddtree_budget":  # the pull request's field
            assert field not in fields and field not in reported
            continue
        assert field in fields and field in reported, field
    assert info.options["--speculative-draft-window-size"] == WINDOW_FIELD
    assert (
        dict(info.options)
        == json.loads((FIXTURES / "sglang_engine_info.json").read_text())["options"]
    )  # the recorded fixture is this release's parser
