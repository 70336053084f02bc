"""Slow: every method's launch command, rendered by `{method_args}` from `ddtune.methods`,
through the installed engines' own parsers (the engine check's probe; no model served).

SGLang 0.5.23 (`--device cuda`, the GPU dry run: resolution without a device): ar, eagle,
eagle3 (with the bundled EAGLE-3 head, as a chain and as a topk-4 tree), mtp (NEXTN), ngram
and dflash accepted; ddtree refused (its budget flag belongs to the unmerged DDTree pull
request). On `--device cpu` ngram and both EAGLE3 commands are accepted too. SGLang's
resolution checks the head's folder exists, not what is in it. vLLM 0.32 (CPU): ar, ngram,
dflash with the bundled drafter and eagle3 with the bundled head accepted (vLLM reads the
head's config.json: a DFlash drafter named as an EAGLE-3 head is refused); mtp over the
bundled target refused by vLLM's own validation (no MTP layers in it), the messages
printed. Prints every verdict: the rows "engine-checked" of docs/benchmarks.md "Methods ×
engines".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ddtune.params import DecodeParams
from ddtune.services import ServiceSpec
from ddtune.services.engine_check import PlannedLaunch, check_launches

sys.path.insert(0, str(Path(__file__).parent))
from sglang_setup import DRAFTER, TARGET, cpu_env, ensure_sglang_venv  # noqa: E402
from vllm_setup import ensure_vllm_venv  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
D = str(DRAFTER)
HEAD = str(DRAFTER.parent / "eagle3")  # the bundled EAGLE-3 head (`ddtune train eagle3`)
METHODS = {
    "ar": {},
    "eagle": {"num_steps": 3, "topk": 4, "num_draft_tokens": 8, "drafter": D},
    "eagle3": {"num_steps": 3, "topk": 1, "drafter": HEAD},
    "mtp": {"num_steps": 2, "topk": 1},
    "ngram": {"num_draft_tokens": 8, "max_bfs_breadth": 4},
    "dflash": {"block_size": 8, "drafter": D},
    "ddtree": {"drafter": D},
}
VLLM_METHODS = {
    "ar": {},
    "ngram": {"num_draft_tokens": 4, "prompt_lookup_max": 3},
    "dflash": {"block_size": 8, "drafter": D},
    "eagle3": {"num_steps": 3, "drafter": HEAD},
    "mtp": {"num_steps": 1},
}
EAGLE3_TREE = {"num_steps": 5, "topk": 4, "num_draft_tokens": 8, "drafter": HEAD}


def launches(methods: dict[str, dict]) -> list[PlannedLaunch]:
    found = []
    for name, knobs in methods.items():
        wire = {"method": name, "method_knobs": knobs, "budget": 8}
        params = DecodeParams.from_wire(wire).canonical()
        found.append(PlannedLaunch(params.label(), params))
    return found


def verdicts(spec: ServiceSpec, planned: list[PlannedLaunch], tmp_path: Path) -> dict[str, str]:
    started = time.monotonic()
    report = check_launches(spec, planned, tmp_path)
    print(f"\n{report.summary()} (wall {time.monotonic() - started:.1f} s)")
    refused = {r.label: r.line() for r in report.refusals}
    for launch in planned:
        print(f"  {launch.label}: {refused.get(launch.label, 'accepted')}")
    assert report.checked == len(planned)
    return {launch.label.split()[0]: refused.get(launch.label, "accepted") for launch in planned}


def sglang_spec(python: Path, device: str) -> ServiceSpec:
    command = [str(python), "-m", "sglang.launch_server", "--model-path", str(TARGET)]
    command += ["--port", "{port}", "{method_args}", "--device", device]
    return ServiceSpec.from_dict({"engine": "sglang", "command": command, "env": cpu_env()})


def test_sglang_parses_every_method(tmp_path):
    python = ensure_sglang_venv()
    gpu = verdicts(sglang_spec(python, "cuda"), launches(METHODS), tmp_path)
    assert [m for m, v in gpu.items() if v != "accepted"] == ["ddtree"]
    assert "--speculative-ddtree-budget" in gpu["ddtree"]
    tree = verdicts(sglang_spec(python, "cuda"), launches({"eagle3": EAGLE3_TREE}), tmp_path)
    assert tree == {"eagle3": "accepted"}
    on_cpu = {"ngram": METHODS["ngram"], "eagle3": METHODS["eagle3"]}
    cpu = verdicts(sglang_spec(python, "cpu"), launches(on_cpu), tmp_path)
    assert cpu == {"ngram": "accepted", "eagle3": "accepted"}


def test_vllm_parses_its_methods(tmp_path):
    """The target through a link whose path does not hold "eagle3": vLLM 0.32 renames an
    explicit method after the draft's path (mtp's draft is the target itself), so from a
    checkout under a folder called eagle3 it would check mtp as eagle3 (docs/engines.md
    "MTP on vLLM")."""
    python = ensure_vllm_venv()
    target = tmp_path / "target"
    target.symlink_to(TARGET)
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(target)]
    command += ["--port", "{port}", "{method_args}", "--dtype", "float32", "--max-model-len", "512"]
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    spec = ServiceSpec.from_dict({"engine": "vllm", "command": command, "env": env})
    found = verdicts(spec, launches(VLLM_METHODS), tmp_path)
    assert [found[m] for m in ("ar", "ngram", "dflash", "eagle3")] == ["accepted"] * 4
    assert found["mtp"] != "accepted"
    wrong = verdicts(spec, launches({"eagle3": {"num_steps": 3, "drafter": D}}), tmp_path)
    assert wrong["eagle3"] != "accepted"  # a DFlash drafter is no EAGLE-3 head
