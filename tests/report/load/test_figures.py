"""The report's load levels: figures over repeats, recommendations per level and for a load
mix, the crossover sentence, the serialisation warning, files; no load levels: no change."""

from __future__ import annotations

import csv
import random
import re

import pytest

from ddtune.bench.load.latency import Distribution, LevelResult
from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.report import ReportOptions, build_report
from ddtune.report.build import analyze

AR, DDTREE, DFLASH = DecodeParams("ar"), DecodeParams("ddtree", 16, 4), DecodeParams("dflash")
# output tok/s per level: ddtree wins at low concurrency, AR at high
TPS = {
    AR: {"c1": 50.0, "c4": 180.0, "c16": 600.0},
    DDTREE: {"c1": 120.0, "c4": 260.0, "c16": 420.0},
    DFLASH: {"c1": 90.0, "c4": 200.0, "c16": 500.0},
}


def level(key: str, tps: float, rng: random.Random, **extra) -> dict:
    concurrency = int(key[1:])
    value = tps * (1 + rng.gauss(0, 0.01))
    e2e = concurrency * 32 / value  # Little's law with 32 tokens per request
    d = Distribution(20, e2e, e2e, e2e * 1.1, e2e * 1.3)
    result = LevelResult(
        key, "closed", concurrency, None, requests=20, output_tps=value, request_rate=value / 32
    )
    result.ttft_s, result.e2e_s, result.itl_s = d, d, d
    result.acceptance_length = 1.0
    for name, v in extra.items():
        setattr(result, name, v)
    return result.to_dict()


def rows(key: str, e2e: float, n: int = 5) -> list[dict]:
    return [
        {
            "level": key,
            "sent_s": i,
            "lag_s": 0.0,
            "ttft_s": e2e / 8,
            "e2e_s": e2e,
            "error": None,
            "itl_s": [e2e / 40] * 31,
            "output_tokens": 32,
        }
        for i in range(n)
    ]


def load_records(synth, tps=TPS, repeats=3, seed=0, serialised=False, slo=False):
    effects = [
        synth.Effect(AR, 100, 80, 1.0, baseline=True, passed=None),
        synth.Effect(DFLASH, 130, 100, 3.0, passed=None),
        synth.Effect(DDTREE, 180, 140, 4.0, passed=None),
    ]
    records = synth.make_records(effects, repeats=repeats, seed=seed)
    rng = random.Random(seed)
    for record in records:
        levels = []
        for key, value in tps[record.params].items():
            extra = {"serialised": serialised and key != "c1"}
            if slo:
                extra.update(slo_attainment=0.99, goodput_tps=value * 0.9, goodput_rps=1.0)
            levels.append(level(key, value, rng, **extra))
        requests = [r for d in levels for r in rows(d["key"], d["e2e_s"]["mean"])]
        record.load = {"levels": levels, "requests": requests, "max_rate": None}
    return records


def test_recommendation_per_level_and_the_crossover(synth) -> None:
    summary = analyze(load_records(synth), ReportOptions())
    load = summary.load
    assert load is not None and load.levels == ["c1", "c4", "c16"] and not load.slo
    best = {r.level: (r.status, r.label) for r in load.recommendations}
    assert best == {
        "c1": ("separated", DDTREE.label()),
        "c4": ("separated", DDTREE.label()),
        "c16": ("separated", AR.label()),
    }
    assert "Separated from every other config (paired by pass)" in load.recommendations[0].text
    assert any(
        s.startswith(
            f"{DDTREE.label()} beats ar up to concurrency 4; from concurrency 16 ar is faster"
        )
        for s in load.crossovers
    ), load.crossovers
    assert any(
        s.startswith(f"{DFLASH.label()} beats ar up to concurrency 4") for s in load.crossovers
    )
    assert any(
        s.startswith(f"{DDTREE.label()} beats {DFLASH.label()} up to concurrency 4")
        for s in load.crossovers
    )
    assert load.best_changes is not None and "changes with load" in load.best_changes
    assert not load.serialisation
    fig = load.figure(DDTREE.label(), "c4")
    assert fig is not None and fig.repeats == 3 and fig.metrics["output_tps"].n == 3
    assert fig.pooled["e2e_s"] is not None and fig.pooled["e2e_s"].n == 15  # 5 rows x 3 repeats
    assert "2.00x" not in load.recommendations[0].text and "x ar" in load.recommendations[0].text


def test_equal_levels_are_equivalent_and_noisy_ones_inconclusive(synth) -> None:
    close = {p: dict(v) for p, v in TPS.items()}
    close[DDTREE]["c16"] = 601.0  # within 0.2% of ar: equivalent, the cheaper (ar) is recommended
    rec = next(
        r
        for r in analyze(load_records(synth, tps=close), ReportOptions()).load.recommendations
        if r.level == "c16"
    )
    assert (rec.status, rec.label) == (
        "equivalent",
        AR.label(),
    ) and "Equivalent within 3%" in rec.text
    noisy = load_records(synth, tps=close, repeats=3)
    for r in noisy:  # dflash at c16: 15% below or above ar, pass by pass
        if r.params == DFLASH:
            for d in r.load["levels"]:
                if d["key"] == "c16":
                    d["output_tps"] = 600.0 * (1.15, 0.85, 1.0)[r.repeat]
    rec = next(r for r in analyze(noisy, ReportOptions()).load.recommendations if r.level == "c16")
    assert rec.status == "inconclusive" and DFLASH.label() in rec.contenders
    assert "Inconclusive: cannot be separated from" in rec.text


def test_load_mix_recommendation(synth) -> None:
    records = load_records(synth)
    high = analyze(records, ReportOptions(load_weights={"c16": 1.0, "c1": 0.1})).load.mix
    low = analyze(records, ReportOptions(load_weights={"c1": 1.0, "c4": 1.0})).load.mix
    assert high is not None and high.label == AR.label() and high.status == "separated"
    assert low is not None and low.label == DDTREE.label()
    assert "load mix (c1 1, c4 1)" in low.text
    missing = analyze(records, ReportOptions(load_weights={"c1": 1.0, "c64": 1.0})).load
    assert any("c64" in note and "not measured" in note for note in missing.notes)
    assert analyze(records, ReportOptions()).load.mix is None


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"x4": 1.0}, "'x4' is not a load level"),
        ({"c4": -1.0}, "must be >= 0"),
        ({"c4": 0.0}, "at least one level a weight above 0"),
    ],
)
def test_bad_load_weights_name_the_key(weights, message) -> None:
    with pytest.raises(UserError, match=message) as info:
        ReportOptions.from_dict({"load_weights": weights})
    assert info.value.key == "report.load_weights"


def test_a_serialising_server_is_reported_as_such(synth) -> None:
    flat = {p: {"c1": v["c1"], "c4": v["c1"] * 1.01, "c16": v["c1"] * 1.02} for p, v in TPS.items()}
    load = analyze(load_records(synth, tps=flat, serialised=True), ReportOptions()).load
    assert len(load.serialisation) == 1
    sentence = load.serialisation[0]
    assert sentence.startswith("The server serialises requests: at c4, c16 every config")
    assert "not a property of the decoding config" in sentence
    assert re.search(
        r"aggregate tok/s 1\.0\dx from c1 to c16 while mean e2e latency grew 1[56]\.", sentence
    )
    assert all("serialised requests here" in r.text for r in load.recommendations[1:])


def test_slo_levels_recommend_by_goodput_and_failed_levels_are_noted(synth) -> None:
    records = load_records(synth, slo=True)
    bad = records[0]  # AR repeat 0: every request at c16 failed
    for d in bad.load["levels"]:
        if d["key"] == "c16":
            d.update(
                status="failed", error="HTTP 500 from /v1/completions: overloaded", output_tps=None
            )
    load = analyze(records, ReportOptions()).load
    assert load.slo and {r.metric for r in load.recommendations} == {"goodput_tps"}
    fig = load.figure(AR.label(), "c16")
    assert fig.failed == 1 and fig.repeats == 3 and fig.metrics["output_tps"].n == 2
    assert "overloaded" in fig.errors[0]


def test_files_and_sections(synth, tmp_path) -> None:
    summary = build_report(load_records(synth), tmp_path, ReportOptions(load_weights={"c4": 1}))
    md = (tmp_path / "report.md").read_text()
    assert "## Load levels" in md and md.index("## Configurations") < md.index("## Load levels")
    assert "beats ar up to concurrency 4" in md and "load mix (c4 1)" in md
    for name in ("load_throughput.png", "load_latency.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (tmp_path / "load_levels.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 9 and {r["level"] for r in table} == {"c1", "c4", "c16"}
    assert float(table[0]["output_tps_mean"]) > 0 and table[0]["e2e_p99_s"]
    assert "under load c1:" in summary.terminal_table()
    html = (tmp_path / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(summary.plots) + 2


def test_records_without_load_levels_change_nothing(synth, tmp_path) -> None:
    summary = build_report(synth.make_records(synth.standard_effects(), repeats=2), tmp_path)
    assert summary.load is None and "load_csv" not in summary.files
    assert "Load levels" not in (tmp_path / "report.md").read_text()
    assert not (tmp_path / "load_levels.csv").exists()
