"""The installed engines' own parsers accept a schedule as ddtune renders it: vLLM's
`num_speculative_tokens_per_batch_size` validator and dense lookup, SGLang's adaptive
config loader, and both engines' argument checks on an EAGLE-3 schedule with the bundled
head (slow: each imports the engine in its own venv)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.engines.parser_probe import EngineCommand, EngineProbe
from ddtune.engines.schedule import Schedule, Tier, sglang_adaptive, vllm_schedule
from ddtune.params import DecodeParams
from ddtune.services.scheduled import scheduled_launch
from ddtune.services.spec import ServiceSpec

sys.path.insert(0, str(Path(__file__).parent))
from sglang_setup import cpu_env  # noqa: E402
from vllm_setup import REPO  # noqa: E402

HEAD = Path("src/ddtune/assets/models/eagle3")

DFLASH, AR = DecodeParams("dflash"), DecodeParams("ar")
pytestmark = pytest.mark.slow


def engine_python(name: str) -> Path:
    venv = REPO / f".venv-{name}"
    if not (venv / f".ddtune-{name}-ok").exists():
        pytest.skip(f"{venv} is not installed (make it as tests/integration/{name}_setup.py says)")
    return venv / "bin" / "python"


def run(python: Path, program: str) -> str:
    done = subprocess.run([str(python), "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_vllm_builds_its_lookup_from_our_ranges() -> None:
    schedule = Schedule((Tier(2, DFLASH, {"K": 4}), Tier(6, DFLASH, {"K": 2}), Tier(None, AR)))
    fields = vllm_schedule(schedule).fields
    assert fields is not None
    program = (
        "import json\nfrom vllm.v1.spec_decode.dynamic.utils import "
        "build_dynamic_sd_schedule_lookup as b\n"
        f"print(json.dumps(b({fields['num_speculative_tokens_per_batch_size']!r}, 10, "
        f"{fields['num_speculative_tokens']})))"
    )
    lookup = json.loads(run(engine_python("vllm"), program))
    assert lookup[1:] == [4, 4, 2, 2, 2, 2, 0, 0, 0, 0]  # batch sizes 1..10


def test_sglang_loads_our_adaptive_config(tmp_path) -> None:
    eagle = {"algorithm": "eagle3", "eagle_topk": 1}  # a var naming the method (METHOD_VARS)
    schedule = Schedule(
        (Tier(3, DFLASH, {**eagle, "steps": 5}), Tier(None, DFLASH, {**eagle, "steps": 1}))
    )
    fields = sglang_adaptive(schedule).fields
    assert fields is not None
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(fields["speculative_adaptive_config"]))
    program = (
        "from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams as A\n"
        f"a = A(5, {str(path)!r})\nprint([a.get_steps_for_batch(n) for n in (1, 3, 4, 9)])"
    )
    assert run(engine_python("sglang"), program) == "[5, 5, 1, 1]"


def test_vllm_and_sglang_check_an_eagle3_schedule_with_the_bundled_head(tmp_path) -> None:
    """The scheduled launch of EAGLE-3 with the bundled head (5 draft tokens for 1-2 requests,
    2 from 3 on) through each engine's own argument check: vLLM validates the per-batch-size
    K against the head's config, SGLang parses the adaptive flags over the head's EAGLE3."""
    head, target = str(REPO / HEAD), str(REPO / HEAD.parent / "target")

    def eagle3(steps: int, **knobs: int) -> DecodeParams:
        wire = {"method": "eagle3", "method_knobs": {"num_steps": steps, "drafter": head, **knobs}}
        return DecodeParams.from_wire(wire)

    checks = {
        "vllm": (["vllm.entrypoints.openai.api_server", "--model", target], {}),
        "sglang": (["sglang.launch_server", "--model-path", target], {"topk": 1}),
    }
    for engine, (front, knobs) in checks.items():
        python = engine_python(engine)
        command = [str(python), "-m", *front, "{method_args}"]
        if engine == "vllm":
            command += ["--dtype", "float32", "--max-model-len", "512"]
        spec = ServiceSpec.from_dict({"engine": engine, "command": command})
        tiers = (Tier(2, eagle3(5, **knobs)), Tier(None, eagle3(2, **knobs)))
        launch = scheduled_launch(spec, Schedule(tiers), tmp_path)
        assert launch.switches, launch.words
        for path, text in launch.files.items():
            path.write_text(text)
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
        if engine == "sglang":
            env.update(cpu_env())
        with EngineProbe(engine, str(python), env=env, cwd=tmp_path) as probe:
            verdict = probe.check(EngineCommand(str(python), front[0], tuple(launch.argv[3:])))
        print(f"\n{engine}: {' '.join(launch.argv[3:])}\n  {verdict}")
        assert verdict.accepted, verdict
