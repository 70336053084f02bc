"""The installed engines' own parsers accept a schedule as ddtune renders it: vLLM's
`num_speculative_tokens_per_batch_size` validator and dense lookup, and SGLang's adaptive
config loader (slow: each imports the engine in its own venv)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtune.engines.schedule import Schedule, Tier, sglang_adaptive, vllm_schedule
from ddtune.params import DecodeParams

sys.path.insert(0, str(Path(__file__).parent))
from vllm_setup import REPO  # noqa: E402

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
    eagle = {"method": "eagle3", "eagle_topk": 1}
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
