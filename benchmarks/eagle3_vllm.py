"""EAGLE-3 on this CPU: the bundled head's figures, offline and live on vLLM, ratios within one run.

    PYTHONPATH=src python benchmarks/eagle3_vllm.py [--offline-only] [--passes 3]
        [--prompts 20] [--max-tokens 96] [--out runs/eagle3-bench]
        [--served URL --k K]

1. The head (src/ddtune/assets/models/eagle3): file size, parameters, draft vocabulary.
2. Offline, exact at T = 0 (`ddtune.train.eagle3_eval`): τ (acceptance length: tokens per
   verify round, bonus included) at K = 1..5 draft tokens on the first `--prompts` held-out
   task prompts, `--max-tokens` tokens each, EOS ignored, counted as vLLM's counters count
   rounds; and the K = 5 counts' chain prediction of K = 1..4 (`ddtune.trace.chains`) against
   those exact values: the estimate's own error, without noise.
3. Live (unless --offline-only): `ddtune sweep run` of one spec on vLLM's CPU build (.venv-vllm)
   with plain AR as the baseline, EAGLE-3 at num_steps 1..5, vLLM's DFlash with the bundled
   drafter (block 8: 7 draft tokens) and vLLM's n-gram (4 draft tokens, lookup up to 3): one
   start per config serving `--passes` passes, the same prompts for all. Per config: start to
   READY, the speculative config read back from the server, τ from vLLM's counters (the
   same every pass at T = 0), whether the T = 0 text equals AR's; then τ per K predicted
   from the num_steps = 5 runs against measured. Speed is not compared here: passes of
   different starts run minutes apart on a shared machine (benchmarks/vllm_paired_speed.py
   times each method beside AR, request by request).

With `--served URL --k K` (a vLLM already serving the bundled target and head with
num_speculative_tokens K, model name "target"): the same prompts as token ids, one request
at a time, vLLM's counters read around each; its τ and per-position counts beside the exact
offline ones at that K, and whether its T = 0 tokens are the target's greedy ones: the head
vLLM serves is the head ddtune trained, feature for feature.

Figures: docs/benchmarks.md "EAGLE-3 on vLLM". Minutes per start on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "src" / "ddtune" / "assets" / "models"
HEAD, TARGET = MODELS / "eagle3", MODELS / "target"

SPEC = """
[sweep]
name = "eagle3-bench"
repeats = {passes}
passes_per_start = {passes}
order = "interleaved"
baseline = {{ method = "ar" }}

[space]
method = ["eagle3", "dflash", "ngram"]

[space.eagle3]
num_steps = [1, 2, 3, 4, 5]
drafter = "src/ddtune/assets/models/eagle3"

[space.dflash]
block_size = 8
drafter = "src/ddtune/assets/models/drafter"

[space.ngram]
num_draft_tokens = 4
prompt_lookup_max = 3

[service]
control = "process"
engine = "vllm"
cwd = "{repo}"
command = [".venv-vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server",
           "--model", "src/ddtune/assets/models/target", "--host", "{{host}}", "--port", "{{port}}",
           "{{method_args}}", "--served-model-name", "target", "--max-model-len", "512",
           "--dtype", "float32", "--max-num-seqs", "4"]
port = 18751
expected_start_s = 120
expected_bench_s = 40

[service.env]
VLLM_CPU_KVCACHE_SPACE = "1"
VLLM_CPU_OMP_THREADS_BIND = "1"         # compute on core 1; core 0 left to the API server and the client
HF_HUB_OFFLINE = "1"

[service.timeouts]
start = 900
health = 300

[bench]
temperature = 0
warmup = 1
[bench.short]
n_prompts = 4
prompt_tokens = 100
max_tokens = 64
repeats = 1
[bench.long]
n_prompts = 1
prompt_tokens = 300
max_tokens = 32
repeats = 1

[retry]
attempts = 2
backoff = 2
"""


def head_figures() -> None:
    from safetensors import safe_open

    config = json.loads((HEAD / "config.json").read_text())
    with safe_open(str(HEAD / "model.safetensors"), "pt") as f:
        shapes = {name: f.get_slice(name).get_shape() for name in f.keys()}  # noqa: SIM118
    floats = sum(math.prod(s) for n, s in shapes.items() if n not in ("d2t", "t2d"))
    size = (HEAD / "model.safetensors").stat().st_size
    print(f"head: {size / 1e6:.2f} MB ({config['torch_dtype']}), {floats / 1e6:.2f} M parameters,")
    print(
        f"  draft vocabulary {config['draft_vocab_size']} of {config['vocab_size']}, aux layers "
        f"{config['eagle_config']['eagle_aux_hidden_state_layer_ids']} (vLLM's ids)"
    )


def offline(prompts: int, max_tokens: int) -> None:
    from ddtune.assets import default_tasks_file
    from ddtune.trace.chains import ChainCounts, check_lines, compare, predict_all
    from ddtune.train.eagle3_eval import acceptance_by_steps
    from ddtune.train.tasks import read_jsonl

    texts = [t["prompt"] for t in read_jsonl(default_tasks_file())[:prompts]]
    started = time.monotonic()
    figures = acceptance_by_steps(TARGET, HEAD, texts, max_tokens)
    print(
        f"\noffline, exact at T = 0: {prompts} held-out prompts x {max_tokens} tokens "
        f"({time.monotonic() - started:.0f} s)"
    )
    print(f"{'K':>3} {'tau':>6} {'rounds':>7}  accepted per draft position")
    for name, row in figures.items():
        shares = " ".join(f"{c / row['drafts']:.2f}" for c in row["accepted_per_position"])
        print(f"{name[1:]:>3} {row['tau']:>6.3f} {row['drafts']:>7}  {shares}")
    top = figures["k5"]
    counts = ChainCounts(top["drafts"], tuple(top["accepted_per_position"]))
    exact = {int(name[1:]): row["tau"] for name, row in figures.items()}
    print("\n".join(["", *check_lines(compare(predict_all(counts), exact))]))


def served(url: str, k: int, prompts: int, max_tokens: int) -> None:
    import httpx

    from ddtune.assets import default_tasks_file
    from ddtune.bench.acceptance import parse_prometheus
    from ddtune.ddtree.models.loading import load_decoder, load_eagle3
    from ddtune.ddtree.models.tokenizer import Tokenizer
    from ddtune.train.distill import batch_greedy
    from ddtune.train.eagle3_eval import chain_matches, rounds
    from ddtune.train.tasks import read_jsonl

    target, head = load_decoder(TARGET), load_eagle3(HEAD)
    tokenizer = Tokenizer.load(TARGET)
    texts = [t["prompt"] for t in read_jsonl(default_tasks_file())[:prompts]]
    ours, theirs, same = [0, 0, [0] * k], [0, 0, [0] * k], 0
    with httpx.Client(timeout=600) as client:
        for text in texts:
            ids = tokenizer.encode(text)
            (greedy,) = batch_greedy(target, [ids], max_tokens + k + 1, 0, stop_at_eos=False)
            r = rounds(chain_matches(head, target, ids + greedy, k), len(ids), max_tokens, k)
            before = parse_prometheus(client.get(url + "/metrics").text)
            body = {
                "model": "target",
                "prompt": ids,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
            }
            reply = client.post(url + "/v1/completions", json=body).json()["choices"][0]
            after = parse_prometheus(client.get(url + "/metrics").text)
            same += reply.get("token_ids") == greedy[:max_tokens]
            add(ours, r.drafts, r.accepted, r.per_position)
            add(theirs, *counter_diff(before, after, k))
    for name, (drafts, accepted, per_pos) in (("ddtune, exact", ours), ("vLLM counters", theirs)):
        print(
            f"{name:>14}: tau {1 + accepted / drafts:.3f} over {drafts} rounds; per position "
            f"{per_pos}"
        )
    print(f"T = 0 tokens equal to the target's greedy ones: {same} of {len(texts)} prompts")


def add(total: list, drafts: int, accepted: int, per_pos: list[int]) -> None:
    total[0], total[1] = total[0] + drafts, total[1] + accepted
    total[2] = [a + b for a, b in zip(total[2], per_pos, strict=True)]


def counter_diff(before: dict, after: dict, k: int) -> tuple[int, int, list[int]]:
    from ddtune.engines.vllm import VLLM_ACCEPTED, VLLM_DRAFTS, VLLM_PER_POS

    def diff(key: str) -> int:
        return round(after.get(key, 0.0) - before.get(key, 0.0))

    per_pos = [diff(f"{VLLM_PER_POS}_total{{position={i}}}") for i in range(k)]
    return diff(f"{VLLM_DRAFTS}_total"), diff(f"{VLLM_ACCEPTED}_total"), per_pos


def live(passes: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    spec, store = out / "eagle3-bench.toml", out / "store.sqlite"
    spec.write_text(SPEC.format(passes=passes, repo=REPO))
    ddtune = Path(sys.executable).parent / "ddtune"
    argv = ["nice", "-n", "10", str(ddtune), "sweep", "run", str(spec), "--store", str(store)]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    (out / "sweep.log").write_text(done.stdout + done.stderr)
    print(
        f"\nlive on vLLM: `ddtune sweep run` {time.monotonic() - started:.0f} s, exit "
        f"{done.returncode} (log: {out / 'sweep.log'})"
    )
    summarize(store)


def summarize(path: Path) -> None:
    from ddtune.report.lossless import check_losslessness, load_compare
    from ddtune.sweep.store.db import Store

    store = Store(path, create=False)
    sweep_id = store.sweep_row("eagle3-bench")["id"]
    records = [r for r in store.trial_records(sweep_id) if r.status == "done"]
    notes = {
        row[0]: json.loads(row[1]).get("notes") or []
        for row in store.db.execute("SELECT trial_id, bench_json FROM results")
    }
    started = {}
    for trial in store.trials(sweep_id):
        attempt = store.attempts(trial["id"])[-1]
        if trial["repeat"] == 1:
            identity = json.loads(attempt["identity_json"]).get("speculative_config") or {}
            ready = json.loads(attempt["timings_json"])["start_to_ready_s"]
            read = {k: identity.get(k) for k in ("method", "num_speculative_tokens")}
            started[trial["label"]] = f"{ready:>5.0f} s  {read if identity else 'none'}"
    store.close()
    by_label = defaultdict(list)
    for record in records:
        by_label[record.label].append(record)
    baseline = next(r.label for r in records if r.is_baseline)
    verdicts = check_losslessness(dict(by_label), baseline, load_compare())
    print(f"{'config':<44} {'tau':>6}  {'T=0 vs AR':<10} {'READY':>7}  read back")
    for label, runs in sorted(by_label.items()):
        taus = {r.metrics.get("acceptance_length") for r in runs}
        tau = "-" if taus == {None} else "/".join(f"{t:.3f}" for t in sorted(taus))
        print(f"{label[:44]:<44} {tau:>6}  {verdicts[label].status:<10} {started[label]}")
    chains(by_label, notes)


def chains(by_label: dict[str, list], notes: dict[int, list[str]]) -> None:
    from ddtune.engines.vllm import note_counts
    from ddtune.trace.chains import ChainCounts, check_lines, compare, predict_all

    measured, drafts, counts = {}, 0, [0] * 5
    for label, runs in by_label.items():
        found = re.search(r"eagle3 num_steps=(\d+)", label)
        if not found:
            continue
        k = int(found.group(1))
        measured[k] = mean(r.metrics["acceptance_length"] for r in runs)
        if k != 5:
            continue
        for run in runs:
            note = next(n for n in notes[run.trial_id] if n.startswith("vLLM counters"))
            found = note_counts(note)
            assert found is not None, note
            part = ChainCounts(*found)
            drafts += part.drafts
            counts = [a + b for a, b in zip(counts, part.accepted_per_position, strict=True)]
    pooled = ChainCounts(drafts, tuple(counts))
    print("\n".join(["", *check_lines(compare(predict_all(pooled), measured))]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline-only", action="store_true")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "eagle3-bench")
    parser.add_argument("--summary-only", action="store_true", help="re-read --out's store")
    parser.add_argument("--served", default=None, help="a running vLLM with the head (URL)")
    parser.add_argument("--k", type=int, default=5, help="its num_speculative_tokens")
    args = parser.parse_args()
    head_figures()
    if args.served:
        served(args.served.rstrip("/"), args.k, args.prompts, args.max_tokens)
        return 0
    if args.summary_only:
        summarize(args.out / "store.sqlite")
        return 0
    offline(args.prompts, args.max_tokens)
    if not args.offline_only:
        live(args.passes, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
