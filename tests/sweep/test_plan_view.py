"""`ddtune sweep plan` shows its work: how the sweep runs in the user's words, each limit
against what the sweep would need without it, the configs as a table (the first 20 and a
count of the rest), and with a trace predict, then confirm beside the race."""

from __future__ import annotations

import textwrap

import pytest
from rich.console import Console

from ddtune.cli import main
from ddtune.report.render.document import Paragraph, Section, Table
from ddtune.sweep.plan import prepare, read_spec
from ddtune.sweep.plan.costs import format_duration
from ddtune.sweep.plan_view import SHOWN, SHOWN_TRIALS, bench_text, plan_text, plan_view

COSTS = "expected_start_s = 420\nexpected_bench_s = 60\n"
RACE = """
[sweep]
name = "r"
strategy = "race"
seed = 3
{extra}
baseline = {{ mode = "ar" }}
[space]
budget = [4, 8, 16]
topk = [2, 4]
"""
WIDE = """
[sweep]
name = "wide"
repeats = 2
baseline = { mode = "ar" }
[space]
budget = [2, 4, 8, 16, 32]
topk = [1, 2, 4]
window = [64, "none"]
"""


def _race(spec_text, extra: str = "", service: str = COSTS):
    return spec_text.parse(RACE.format(extra=extra), service)


def _view(spec, tmp_path, everything: bool = False):
    return plan_view(spec, tmp_path / "run" / "store.sqlite", everything=everything).document


def _section(document, start: str) -> Section:
    return next(s for s in document.sections if s.title.startswith(start))


def _lines(document, start: str) -> list[str]:
    return [b.text for b in _section(document, start).blocks if isinstance(b, Paragraph)]


def test_the_configs_table_shows_the_first_20_and_counts_the_rest(tmp_path, spec_text):
    spec = spec_text.parse(WIDE, COSTS)
    assert len(spec.all_configs()) == 31
    document = _view(spec, tmp_path)
    configs = _section(document, "Configs: 31")
    table = configs.blocks[0]
    assert isinstance(table, Table) and table.headers == ["#", "config", "trials now"]
    assert len(table.rows) == SHOWN
    assert table.rows[0] == ["1", "ar (baseline)", "2"]  # the baseline runs every pass
    labels = [config.label() for config, _ in spec.all_configs()]
    assert [row[1] for row in table.rows[1:]] == labels[1:SHOWN]
    assert _lines(document, "Configs") == ["... and 11 more config(s) (--all lists them)"]
    trials = _section(document, "planned now: 62 trial(s), 62 restart(s)")
    assert len(trials.blocks[0].items) == SHOWN_TRIALS
    assert trials.blocks[1].text == f"... and {62 - SHOWN_TRIALS} more trial(s) (--all lists them)"
    everything = _view(spec, tmp_path, everything=True)
    assert len(_section(everything, "Configs").blocks[0].rows) == 31
    assert _lines(everything, "Configs") == []
    assert len(_section(everything, "planned now").blocks[0].items) == 62


def test_the_cli_prints_the_table_whole_and_all_of_it_with_all(tmp_path, capsys, spec_text):
    path = tmp_path / "wide.toml"
    path.write_text(spec_text.toml(WIDE, COSTS))
    store = str(tmp_path / "none.sqlite")
    assert main(["sweep", "plan", str(path), "--store", store]) == 0
    out = capsys.readouterr().out
    assert "\nConfigs: 31\n" in out and "... and 11 more config(s) (--all lists them)" in out
    labels = [config.label() for config, _ in spec_text.parse(WIDE, COSTS).all_configs()]
    row = next(line for line in out.splitlines() if line.lstrip().startswith("20 "))
    assert row.split() == ["20", *labels[19].split(), "2"], row
    table = out.split("planned now")[0]
    assert labels[20] not in table and labels[-1] not in table  # past the first 20: cut
    assert main(["sweep", "plan", str(path), "--store", store, "--all"]) == 0
    out = capsys.readouterr().out
    assert "more config(s)" not in out
    assert all(f"  {label}" in out.split("planned now")[0] for label in labels)
    assert "  62  pass 2" in out  # every trial listed


def test_max_hours_is_set_against_the_median_race_without_it(tmp_path, spec_text):
    """Restart-bound (420 s a start, 60 s a bench): the uncut median, and what a cap
    between the best case and the median does to the answer."""
    spec = _race(spec_text)
    sweep = prepare(spec, None)
    assert sweep.costs is not None
    uncut = sweep.strategy.span(sweep.costs, capped=False)
    assert uncut.median is not None and uncut.best.hours < uncut.median.hours
    cap = round((uncut.best.hours + uncut.median.hours) / 2, 2)
    document = _view(_race(spec_text, f"max_hours = {cap}"), tmp_path)
    limits = _lines(document, "Limits")
    assert limits[0] == (
        f"[sweep] max_hours = {cap:g}: the median race needs "
        f"~{format_duration(uncut.median.seconds)} (a typical landscape): cut there, more than "
        f"half of races stop at it undecided (the best case needs "
        f"~{format_duration(uncut.best.seconds)})"
    )
    assert limits[-1].startswith("a race stopped by a limit is reported as not decided yet")
    capped = prepare(_race(spec_text, f"max_hours = {cap}"), None)
    assert capped.costs is not None
    assert capped.strategy.span(capped.costs).worst.hours <= cap  # the cut, in the estimate


@pytest.mark.parametrize(
    ("cap", "words"),
    [
        (1000.0, "never reached: even the worst case needs ~"),
        (0.2, "every race stops at it undecided"),
    ],
)
def test_a_cap_above_the_worst_case_or_below_the_best_says_so(tmp_path, spec_text, cap, words):
    document = _view(_race(spec_text, f"max_hours = {cap}"), tmp_path)
    assert words in _lines(document, "Limits")[0]


def test_max_trials_of_a_pass_by_pass_race_against_its_best_and_worst(tmp_path, spec_text):
    """No median case for a pass-by-pass race: between its best (7 configs x 3 passes, the
    default min_repeats) and its worst case (x 10 passes), a cap cuts only the races that
    do not decide early."""
    spec = _race(spec_text, "restart_bound = false\nmax_trials = 30")
    lines = _lines(_view(spec, tmp_path), "Limits")
    assert lines[0] == (
        "[sweep] max_trials = 30: a race that decides early fits (the best case needs 21 "
        "trials); one that runs to its worst case (70 trials) stops at it undecided"
    )
    assert lines[1].startswith("[sweep] repeats = 10: at most 10 passes")


def test_a_grid_has_no_limits_and_no_costs_say_so(tmp_path, spec_text):
    grid = spec_text.parse(WIDE, COSTS)
    assert _lines(_view(grid, tmp_path), "Limits") == [
        "none: every trial it plans runs (no max_hours, max_trials or passes cap)"
    ]
    costless = _race(spec_text, "max_hours = 3", service="")
    assert _lines(_view(costless, tmp_path), "Limits")[0] == (
        "[sweep] max_hours = 3: nothing starts past it (no costs known: set [service] "
        "expected_start_s and expected_bench_s)"
    )


@pytest.mark.parametrize(
    ("extra", "service", "words"),
    [
        (
            "",
            COSTS,
            [
                "Restart-bound (auto: a restart (420 s) takes at least one bench (60 s)): every "
                "config that starts gets its own server start",
                "Benches within one start are not independent (they share that start's state)",
                "Pass 1 starts every config once, in a shuffle (seed 3)",
            ],
        ),
        (
            "restart_bound = false",
            COSTS,
            [
                "A race, pass by pass ([sweep] restart_bound = false): each pass runs every "
                "config still in the race, and the baseline, once.",
                "Every trial gets a start of its own: the service is stopped, started with "
                "the config and proven to serve it, then one bench.",
                "The first 3 passes run every config",  # min_repeats
            ],
        ),
        (
            'interleave = "request"',
            COSTS + 'control = "hot"\n',
            [
                "A race, pass by pass (auto: a hot reconfigure in place is not a restart)",
                "Each pass runs on one server, its configs taking turns request by request",
            ],
        ),
    ],
)
def test_how_a_race_runs_in_plain_words(tmp_path, spec_text, extra, service, words):
    lines = _lines(_view(_race(spec_text, extra, service), tmp_path), "How it runs")
    for expected in words:
        assert any(line.startswith(expected) for line in lines), (expected, lines)
    assert not any(word in " ".join(lines) for word in ("F-Race", "by_pass", "by_start"))
    if "request" in extra:
        assert not any(line.startswith("Every trial gets a start") for line in lines)


OPTUNA = """
[sweep]
name = "o"
strategy = "optuna"
max_hours = 2
baseline = { mode = "ar" }
[space]
budget = { low = 2, high = 64, log = true }
[optuna]
n_trials = 12
confirm_top = 2
"""


def test_a_grid_and_a_search_in_plain_words(tmp_path, spec_text):
    grid = _lines(_view(spec_text.parse(WIDE, COSTS), tmp_path), "How it runs")
    assert (
        grid[0]
        == "Every config in every pass: 2 passes of 31 configs, the baseline (ar) among them."
    )
    assert grid[1].startswith("Each pass runs every config once, in a shuffle of its own (seed 0)")
    search = _view(spec_text.parse(OPTUNA, COSTS), tmp_path)
    assert _lines(search, "How it runs") == [
        "A search: Optuna proposes one config at a time from the [space] ranges and the "
        "results so far, up to 12 trials, each a start and a bench of its own.",
        "Then its best 2 and the baseline race pass by pass to confirm the answer (sweep "
        "o.confirm in the store).",
    ]
    assert _lines(search, "Limits") == [
        "[sweep] max_hours = 2: nothing starts past it (no estimate of what the sweep needs "
        "without it)"
    ]


def test_the_text_keeps_every_line_whole_in_a_narrow_pipe(tmp_path, spec_text):
    document = _view(_race(spec_text, "max_hours = 3"), tmp_path)
    text = plan_text(document, Console(width=40, color_system=None))
    limit = _lines(document, "Limits")[0]
    assert f"  {limit}\n" in text  # a paragraph is never folded
    assert text.startswith(document.title + "\n")


TRACED = """
[sweep]
name = "p"
strategy = "{strategy}"
trace = "{trace}"
seed = 1
baseline = {{ mode = "ar" }}
[space]
budget = [2, 4, 8]
topk = [1, 2]
[service]
control = "process"
command = ["{{python}}", "-m", "ddtune.cli", "serve", "--port", "{{port}}", "--target", "{target}",
           "--drafter", "{drafter}", "--mode", "{{mode}}", "--budget", "{{budget}}",
           "--topk", "{{topk}}"]
port = 18799
expected_start_s = 480
expected_bench_s = 300
[bench]
temperature = {temperature}
prompts_file = "{prompts}"
[bench.short]
n_prompts = 1
max_tokens = 8
[bench.long]
n_prompts = 1
max_tokens = 8
[bench.coding]
enabled = false
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A spec writer over a trace recorded once on a random tiny checkpoint."""
    from ddtune.ddtree.testing import write_random_checkpoint

    folder = tmp_path_factory.mktemp("traced")
    target, drafter = write_random_checkpoint(folder, seed=2, std=0.3, vocab_size=12, block_size=4)
    prompts = folder / "prompts.jsonl"
    prompts.write_text('{"prompt": "eat a toe"}\n{"prompt": "tie a", "workload": "long"}\n')

    def write(strategy: str = "predict", temperature: float = 0) -> str:
        path = folder / f"{strategy}-{temperature}.toml"
        text = TRACED.format(
            strategy=strategy,
            trace=folder / "trace",
            target=target,
            drafter=drafter,
            prompts=prompts,
            temperature=temperature,
        )
        path.write_text(textwrap.dedent(text))
        return str(path)

    spec = write()
    assert main(["trace", "record", "--spec", spec, "--out", str(folder / "trace")]) == 0
    return write


def test_predict_then_confirm_beside_the_restart_bound_race(traced, tmp_path, capsys):
    from ddtune.sweep.plan.strategies.predict_path import predicted_path

    path = traced()
    capsys.readouterr()
    assert main(["sweep", "plan", path, "--store", str(tmp_path / "s.sqlite")]) == 0
    out = capsys.readouterr().out
    sweep = prepare(read_spec(path), None)
    assert sweep.forecast is not None and sweep.costs is not None
    found = predicted_path(sweep.spec, sweep.forecast, sweep.costs)
    race = sweep.strategy.span(sweep.costs)
    assert found is not None and found.estimate is not None and race.median is not None
    starts = found.estimate.restarts
    assert starts == len(found.starts) < race.median.restarts  # fewer starts than the race
    assert (
        f"predict, then confirm: ~{starts} restart(s), "
        f"~{format_duration(found.estimate.seconds)} if the predictions hold (each miss: a "
        f"start or two more); without them, the restart-bound race: "
        f"~{race.median.restarts} restart(s), ~{format_duration(race.median.seconds)} (median)"
    ) in out
    assert found.starts[0] == ("ar", "the baseline: what a plain step costs")
    order = ", ".join(label for label, _ in found.starts)
    assert f"starts, in order: {order}; never: {len(found.never)} dominated config(s)" in out
    for label, why in found.starts[1:]:
        assert f"{label}" in out and why in out
    for label, better in found.never.items():
        assert sweep.forecast.dominates(better, label)
    assert "predict, then confirm" in out.split("Configs: 7")[1]  # the table's column


def test_a_race_with_a_trace_names_the_spec_line_that_predicts(traced, tmp_path, capsys):
    path = traced("race")
    assert main(["sweep", "plan", path, "--store", str(tmp_path / "s.sqlite")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if 'strategy = "predict"' in x)
    assert line.startswith('  with strategy = "predict" in [sweep], this trace would take ~')
    assert "if its predictions hold, against the restart-bound race: ~" in line


def test_above_t0_a_trace_predicts_no_path_and_says_why(traced, tmp_path, capsys):
    path = traced("predict", 0.7)
    assert main(["sweep", "plan", path, "--store", str(tmp_path / "s.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "no prediction path: the bench runs at T = 0.7; a trace predicts T = 0 only" in out
    assert "predict, then confirm:" not in out


def test_sweep_plan_splits_a_bench_by_workload(tmp_path) -> None:  # noqa: ANN001
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(
        """
[sweep]
name = "split"
repeats = 1
baseline = { mode = "ar" }
[service]
control = "process"
engine = "ddtune"
command = ["{python}", "-m", "ddtune.cli", "serve", "--port", "{port}", "--mode", "{mode}"]
port = 18799
expected_start_s = 5
expected_bench_s = 60
[bench]
suite = ["humaneval", "mt-bench"]
[bench.suites.humaneval]
limit = 10
max_tokens = 100
[bench.suites.mt-bench]
limit = 5
max_tokens = 100
"""
    )
    text = bench_text(read_spec(spec_path), prepare(read_spec(spec_path), None).costs)
    # 10 x 100 tokens and 5 questions x 2 turns x 100 tokens: half of the 60 s each
    assert text == (
        "  bench per trial: 10 of HumanEval's 164, seeded (bench.seed = 0), ~30 s; "
        "5 of MT-Bench's 80 (2 turns each: 10 requests), seeded (bench.seed = 0), ~30 s"
    )
