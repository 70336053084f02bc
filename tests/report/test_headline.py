"""The answer atop the report (issue 28): which config, how much faster, how sure, the command."""

from __future__ import annotations

from ddtune.params import DecodeParams
from ddtune.records import SweepContext
from ddtune.report import ReportOptions, analyze, build_report
from ddtune.report.headline import headline

STORE = SweepContext(store="runs/my sweep/store.sqlite")


def two_configs(synth, gap: float, sd: float, repeats: int, seed: int = 0):  # noqa: ANN001
    effects = [
        synth.Effect(DecodeParams("ar"), 100.0, 80.0, 1.0, baseline=True, sd=sd),
        synth.Effect(DecodeParams("ddtree", 16, 4, 64), 200.0, 160.0, 4.5, sd=sd),
        synth.Effect(DecodeParams("ddtree", 16, 8, 64), 200.0 * gap, 160.0 * gap, 4.6, sd=sd),
    ]
    return synth.make_records(effects, repeats=repeats, seed=seed)


def test_a_separated_winner_is_decided_with_its_ratio_and_command(synth) -> None:  # noqa: ANN001
    summary = analyze(synth.make_records(synth.standard_effects(), 4), ReportOptions(), STORE)
    answer = headline(summary)
    first = answer.lines[0]
    assert (first.objective, first.status, first.tone) == ("throughput", "decided", "decided")
    assert first.main == "Run ddtree b16 k4 wnone"
    ratio = summary.config("ddtree b16 k4 wnone").ratios["throughput_tps"]
    assert ratio is not None and ratio.low is not None and ratio.high is not None
    assert f"{ratio.mean:.2f}× AR [{ratio.low:.2f}, {ratio.high:.2f}]" in first.detail
    assert "ahead of every other config (the nearest, ddtree b32 k4 wnone, by" in first.detail
    assert [line.title for line in answer.lines] == ["Throughput", "Long context", "Short context"]
    assert answer.command == (
        "ddtune sweep apply --store 'runs/my sweep/store.sqlite' --config 'ddtree b16 k4 wnone'"
    )


def test_a_tie_names_the_cheaper_config(synth) -> None:  # noqa: ANN001
    options = ReportOptions(tolerance=0.05)
    summary = analyze(two_configs(synth, gap=1.005, sd=0.004, repeats=6), options, STORE)
    first = headline(summary).lines[0]
    assert summary.recommendations[0].status == "equivalent"
    assert (first.status, first.tone) == ("a tie within 5%", "tie")
    assert first.main == "Run ddtree b16 k4 w64"  # the cheaper of the two (topk 4 < 8)
    assert first.detail.endswith("; within 5% of ddtree b16 k8 w64, the cheaper of the two")


def test_a_tie_whose_cheaper_config_also_leads_says_both(synth) -> None:  # noqa: ANN001
    summary = analyze(
        two_configs(synth, gap=0.995, sd=0.004, repeats=6), ReportOptions(tolerance=0.05), STORE
    )
    first = headline(summary).lines[0]
    rec = summary.recommendations[0]
    assert rec.status == "equivalent" and rec.label == rec.leader == "ddtree b16 k4 w64"
    assert first.detail.endswith(
        "; within 5% of ddtree b16 k8 w64, the faster and cheaper of the two"
    )


def test_an_open_race_says_how_many_more_passes_would_decide(synth) -> None:  # noqa: ANN001
    summary = analyze(two_configs(synth, gap=1.04, sd=0.03, repeats=3, seed=2), ReportOptions())
    rec = summary.recommendations[0]
    assert rec.status == "inconclusive" and rec.required_repeats is not None
    answer = headline(summary)
    first = answer.lines[0]
    more = rec.required_repeats - 3
    passes = "pass" if more == 1 else "passes"
    assert first.status == f"not decided yet: about {more} more {passes} would decide"
    assert first.main == f"Leaning {rec.leader}" and first.tone == "open"
    assert answer.command is None  # no store known: no command to print


def test_the_answer_comes_first_in_both_renderings(synth, tmp_path) -> None:  # noqa: ANN001
    build_report(synth.make_records(synth.standard_effects(), 3), tmp_path, context=STORE)
    markdown = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert markdown.index("## Answer") < markdown.index("## Recommendations")
    assert "- Throughput: **Run ddtree b16 k4 wnone**:" in markdown
    assert "```sh\nddtune sweep apply --store 'runs/my sweep/store.sqlite'" in markdown
    assert html.index('<section id="answer" class="answer">') < html.index(
        "<h2>Recommendations</h2>"
    )
    assert '<span class="status">decided</span>' in html
    assert html.index('alt="Every config against the baseline"') < html.index("Recommendations")
