"""Every mistake caught before the first stop: `sweep plan` and `sweep run` exit 2 with one
line naming the key and the fix, and the FAKE service (which counts its starts in
$FAKE_COUNT_STARTS) is never started."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtune.cli import main
from ddtune.sweep.checks.before_stop import longest_context

CONFIGS = """
    [[configs]]
    mode = "ddtree"
    budget = 4
    topk = 2
    window = {window}
"""


def _spec(
    tmp_path: Path, writer, port: int, window: str = '"none"', bench: str = "", sweep="repeats = 1"
):
    ledger = tmp_path / "starts.txt"
    service = f'env = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    path = writer(
        tmp_path,
        "trap",
        CONFIGS.format(window=window),
        port,
        service=service,
        sweep=sweep,
    )
    if bench:
        path.write_text(path.read_text().replace("[bench]\n", f"[bench]\n{bench}\n", 1))
    return path, ledger


TRAPS = {
    "prompts_file missing": ({"bench": 'prompts_file = "nope.jsonl"'}, "bench.prompts_file"),
    "tasks_file missing": ({}, "bench.coding.tasks_file"),
    "traffic file missing": ({"bench": 'traffic_file = "logged.jsonl"'}, "traffic"),
    "window as wide as the bench": ({"window": "2048"}, "allow_indistinct_windows = true"),
    "budget 0": ({"window": "8"}, "budget must be at least 1"),
}


@pytest.mark.parametrize("trap", sorted(TRAPS))
@pytest.mark.parametrize("command", ["plan", "run"])
def test_each_trap_is_refused_before_any_start(
    trap, command, tmp_path, fake_spec_writer, port, capsys
):
    options, named = TRAPS[trap]
    spec, ledger = _spec(tmp_path, fake_spec_writer, port, **options)
    if trap == "budget 0":
        spec.write_text(spec.read_text().replace("budget = 4", "budget = 0"))
    if "tasks_file" in trap:
        coding = "[bench.coding]\ntasks_file = 'gone.jsonl'\nlimit = 1\n"
        spec.write_text(spec.read_text().replace("[bench.coding]\nenabled = false\n", coding))
    store = tmp_path / "s" / "store.sqlite"
    flag = "--store"
    code = main(["sweep", command, str(spec), flag, str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and named in err[0], err
    assert not ledger.exists(), "the service was started before the refusal"
    assert not store.parent.exists()


def test_an_unwritable_store_is_one_line_not_a_traceback(tmp_path, fake_spec_writer, port, capsys):
    spec, ledger = _spec(tmp_path, fake_spec_writer, port)
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the store's folder would go
    for command, flag in (("plan", "--store"), ("run", "--store")):
        code = main(["sweep", command, str(spec), flag, str(blocker / "s" / "store.sqlite")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(f"ddtune: error: {flag}"), err
    assert not ledger.exists()


def test_plan_leaves_no_folder_behind_and_allows_indistinct_windows_when_asked(
    tmp_path, fake_spec_writer, port, capsys
):
    spec, _ = _spec(
        tmp_path, fake_spec_writer, port, window="2048", sweep="allow_indistinct_windows = true"
    )
    store = tmp_path / "a" / "b" / "store.sqlite"
    assert main(["sweep", "plan", str(spec), "--store", str(store)]) == 0
    assert not (tmp_path / "a").exists()


def test_a_bare_none_in_toml_gets_the_quoted_hint(tmp_path, fake_spec_writer, port, capsys):
    spec, _ = _spec(tmp_path, fake_spec_writer, port, window="None")
    assert main(["sweep", "plan", str(spec)]) == 2
    assert 'write window = "none"' in capsys.readouterr().err


def test_restart_bound_auto_is_accepted_with_every_strategy(
    tmp_path, fake_spec_writer, port, capsys
):
    for strategy in ("grid", "race"):
        sweep = f'repeats = 4\nstrategy = "{strategy}"\nrestart_bound = "auto"'
        spec, _ = _spec(tmp_path, fake_spec_writer, port, sweep=sweep)
        code = main(["sweep", "plan", str(spec), "--store", str(tmp_path / "s.sqlite")])
        assert code == 0, capsys.readouterr().err


def test_longest_context_counts_prompt_and_answer_of_every_bundled_workload(spec_text):
    spec = spec_text.parse(
        '[sweep]\nname = "x"\n[[configs]]\nmode = "ar"\n'
        + spec_text.bench(0, (1, 20, 4), (1, 300, 50))
    )
    assert longest_context(spec.bench) == 350
