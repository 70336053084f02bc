"""Every reading command the docs show, on the store of every kind of sweep the examples hold
(issue 44, item 7): `sweep report` (beside the store, no --out), `status`, `export` (CSV and
JSON), `apply --dry-run` and `watch` (one page and its state), each exit 0 with every file
written and no traceback.

The stores are real sweeps against fakes, a few seconds each:

    methods   vLLM's n-gram named as a method (`{method_args}`) beside plain decoding, on
              the FAKE fault server answering as vLLM (the store the report once crashed on:
              `method`/`method_knobs` columns beside a config without them)
    suites    HumanEval (2 of its 164) and the user's traffic beside the bundled prompts, in
              a restart-bound race, on the FAKE fault server as ddtune's engine
    load      two load levels (c1, c2) and an SLO: load levels and a schedule, on the FAKE
              load server
    predict   strategy predict with a trace recorded on a random tiny checkpoint, the FAKE
              fault server standing in for the service that loads it
    ray       two service slots (the Ray driver over a thread pool, as the Ray tests run it)
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from starlette.testclient import TestClient

from ddtune.cli import main
from ddtune.report.render.atomic import MANIFEST
from ddtune.sweep.plan.strategies import read_spec
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.watch import Snapshot, create_watch_app

TESTS = Path(__file__).resolve().parents[1]
FAULT = TESTS / "services" / "fake_fault_server.py"
LOAD = TESTS / "bench" / "fake_load_server.py"
SLEEPY = TESTS / "sweep" / "run" / "ray" / "sleepy_server.py"
REPORT_FILES = {"report.md", "report.html", "results.csv", "results.json"}
TINY_BENCH = """
    [bench]
    warmup = 0
    chars_per_token = 1.0
    [bench.short]
    n_prompts = 1
    prompt_tokens = 20
    max_tokens = 4
    repeats = 1
    [bench.long]
    n_prompts = 1
    prompt_tokens = 40
    max_tokens = 4
    repeats = 1
    [bench.coding]
    enabled = false
"""


def fault_service(port: int, *args: str, engine: str = "ddtune", extra: str = "") -> str:
    argv = [sys.executable, "-S", str(FAULT), "--port", "{port}", *args]
    return textwrap.dedent(f"""
        [service]
        control = "process"
        engine = "{engine}"
        engine_check = false
        command = {json.dumps(argv)}
        port = {port}
        generations = 1
        gpu = "off"
        {extra}
        [service.timeouts]
        stop = 5
        start = 30
        health = 30
    """)


def methods_spec(folder: Path, port: int) -> str:
    return (
        textwrap.dedent("""
        [sweep]
        name = "methods"
        repeats = 2
        baseline = { method = "ar" }
        [space]
        method = ["ngram"]
        [space.ngram]
        num_draft_tokens = [2, 3]
        """)
        + fault_service(port, "{method_args}", engine="vllm")
        + textwrap.dedent(TINY_BENCH)
    )


LEGACY_ARGS = (
    "--mode",
    "{mode}",
    "--budget",
    "{budget}",
    "--topk",
    "{topk}",
    "--window",
    "{window}",
)


def suites_spec(folder: Path, port: int) -> str:
    traffic = folder / "traffic.jsonl"
    traffic.write_text(
        '{"prompt": "def f(x):", "max_tokens": 4}\n{"prompt": "import os", "max_tokens": 4}\n'
    )
    bench = textwrap.dedent(TINY_BENCH).replace(
        "[bench]\n", f'[bench]\nsuite = ["bundled", "humaneval"]\ntraffic_file = "{traffic}"\n'
    )
    bench += "[bench.suites.humaneval]\nlimit = 2\nmax_tokens = 4\n"
    return (
        textwrap.dedent("""
        [sweep]
        name = "suites"
        strategy = "race"
        restart_bound = true
        repeats = 3
        min_repeats = 2
        baseline = { mode = "ar" }
        [[configs]]
        mode = "ddtree"
        budget = 4
        topk = 2
        """)
        + fault_service(port, *LEGACY_ARGS)
        + bench
    )


def load_spec(folder: Path, port: int) -> str:
    argv = [sys.executable, str(LOAD), "--port", "{port}", "--token-ms", "{token_ms}"]
    return (
        textwrap.dedent(f"""
        [sweep]
        name = "load"
        repeats = 2
        baseline = {{ mode = "ar", vars = {{ token_ms = 4 }} }}
        [[configs]]
        mode = "ddtree"
        budget = 16
        topk = 4
        vars = {{ token_ms = 2 }}
        [service]
        control = "process"
        engine = "openai"
        model = "fake-model"
        command = {json.dumps(argv)}
        port = {port}
        generations = 1
        gpu = "off"
        vars = {{ token_ms = 4 }}
        [service.timeouts]
        stop = 10
        start = 60
    """)
        + textwrap.dedent(TINY_BENCH).replace("[bench.long]\n", "[bench.long]\nenabled = false\n#")
        + (
            "[bench.load]\nconcurrency = [1, 2]\nrequests = 4\nwarmup_requests = 1\n"
            "[bench.slo]\ne2e_p99_s = 5.0\n[report]\nload_weights = { c1 = 1, c2 = 1 }\n"
        )
    )


def predict_spec(folder: Path, port: int) -> str:
    from ddtune.ddtree.testing import write_random_checkpoint

    target, drafter = write_random_checkpoint(
        folder / "models", seed=2, std=0.3, vocab_size=12, block_size=4
    )
    prompts = folder / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')
    args = ("--target", str(target), "--drafter", str(drafter), *LEGACY_ARGS)
    bench = textwrap.dedent(TINY_BENCH).replace(
        "[bench]\n", f'[bench]\ntemperature = 0\nprompts_file = "{prompts}"\n'
    )
    return (
        textwrap.dedent(f"""
        [sweep]
        name = "predict"
        strategy = "predict"
        trace = "{folder / "trace"}"
        repeats = 3
        baseline = {{ mode = "ar" }}
        [[configs]]
        mode = "ddtree"
        budget = 4
        topk = 2
        [[configs]]
        mode = "ddtree"
        budget = 2
        topk = 2
        """)
        + fault_service(port, *args)
        + bench
    )


def run_spec(folder: Path, name: str, text: str) -> Path:
    """The spec written and run to its end (the local loop): its store's path."""
    spec = folder / f"{name}.toml"
    spec.write_text(text)
    if name == "predict":
        assert main(["trace", "record", "--spec", str(spec), "--out", str(folder / "trace")]) == 0
    store = folder / "runs" / name / "store.sqlite"
    out = io.StringIO()
    summary = run_sweep(read_spec(spec), store, Console(file=out, width=200))
    assert summary.done > 0 and summary.failed == 0, out.getvalue()
    return store


def ray_store(folder: Path, spec_text, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two slots of the sleepy server, the Ray driver over the thread pool of the Ray tests."""
    path = TESTS / "sweep" / "run" / "ray" / "conftest.py"
    loaded = importlib.util.spec_from_file_location("ray_fixtures", path)
    assert loaded is not None and loaded.loader is not None
    fixtures = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(fixtures)
    import ddtune.sweep.run.ray.driver as dispatch

    monkeypatch.setattr(
        dispatch, "_ray_pool", lambda spec, root, store: fixtures.ThreadPool(spec, root, store)
    )
    spec = fixtures.write_spec(spec_text, folder, slots=2, repeats=1, name="ray")
    store = folder / "runs" / "ray" / "store.sqlite"
    out = io.StringIO()
    summary = run_sweep(read_spec(spec), store, Console(file=out, width=200))
    assert summary.done == 2 and summary.failed == 0, out.getvalue()
    return store


KINDS: dict[str, Callable[[Path, int], str]] = {
    "methods": methods_spec,
    "suites": suites_spec,
    "load": load_spec,
    "predict": predict_spec,
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory, spec_text) -> dict[str, Path]:
    """Each kind's store, built once for every test below (which only read them)."""
    built = {}
    for name, make in KINDS.items():
        folder = tmp_path_factory.mktemp(name)
        built[name] = run_spec(folder, name, make(folder, spec_text.free_port()))
    with pytest.MonkeyPatch.context() as monkeypatch:
        built["ray"] = ray_store(tmp_path_factory.mktemp("ray"), spec_text, monkeypatch)
    return built


ALL_KINDS = [*KINDS, "ray"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_report_writes_every_file_beside_its_store(stores, kind, capsys):
    store = stores[kind]
    folder = store.parent / "report"
    for stale in folder.glob("*"):  # the live report of the run: written again, whole
        stale.unlink()
    code, out, err = cli(capsys, "sweep", "report", "--store", str(store))
    assert code == 0, err
    written = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    expected = set(REPORT_FILES)
    if kind == "load":
        expected |= {"load_levels.csv", "schedule.json"}
    assert expected <= written, written
    assert sorted(written) == json.loads((folder / MANIFEST).read_text())
    rows = list(csv.DictReader((folder / "results.csv").open()))
    assert len(rows) >= 2 and all(row["label"] for row in rows)
    if kind == "methods":  # a config without a method beside the n-gram ones
        assert {row["method"] for row in rows} == {"", "ngram"}
        knobs = [json.loads(row["method_knobs"]) for row in rows if row["method"]]
        assert sorted(k["num_draft_tokens"] for k in knobs) == [2, 3]
    data = json.loads((folder / "results.json").read_text())
    assert data["trials"] and f"in {folder}" in " ".join(out.split())


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_status_and_export_read_every_store(stores, kind, capsys, tmp_path):
    store = str(stores[kind])
    code, out, err = cli(capsys, "sweep", "status", "--store", store)
    assert code == 0 and "config" in out, err
    for form in ("csv", "json"):
        target = tmp_path / f"trials.{form}"
        code, _, err = cli(
            capsys, "sweep", "export", "--store", store, "--format", form, "--out", str(target)
        )
        assert code == 0 and target.stat().st_size > 0, err
    assert json.loads((tmp_path / "trials.json").read_text())
    assert list(csv.DictReader((tmp_path / "trials.csv").open()))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_apply_dry_run_says_what_it_would_do_and_changes_nothing(stores, kind, capsys):
    """The recommendation, or (none decided yet, as a short sweep leaves it) a named config:
    what apply would do, said, and the store untouched."""
    store = stores[kind]
    before = store.stat().st_mtime_ns
    code, _, err = cli(capsys, "sweep", "apply", "--store", str(store), "--dry-run")
    if code != 0:
        assert code == 2 and "Pass --config LABEL" in err, err
        label = first_label(store)
        code, _, err = cli(
            capsys, "sweep", "apply", "--store", str(store), "--dry-run", "--config", label
        )
    assert code == 0, err
    said = " ".join(err.split())
    assert said.startswith("config: ") and "serve it with:" in said
    assert store.stat().st_mtime_ns == before


def first_label(store: Path) -> str:
    """A config the sweep measured (the report's first row)."""
    rows = csv.DictReader((store.parent / "report" / "results.csv").open())
    return next(iter(rows))["label"]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_watch_serves_the_page_and_its_state(stores, kind):
    app = create_watch_app(Snapshot(stores[kind], None), 2.0)
    with TestClient(app) as client:
        page, state = client.get("/"), client.get("/state.json")
    assert page.status_code == 200 and '<div id="live">' in page.text
    assert state.status_code == 200 and state.json()["configs"]
