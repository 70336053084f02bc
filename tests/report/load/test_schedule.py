"""The schedule in the report: the config per range of concurrent requests, its gain over the
best single config on the load mix (paired by pass), one config where switching is not worth
it, `report.schedule` in results.json, the section and schedule.json."""

from __future__ import annotations

import json
import random

from ddtune.bench.load.latency import Distribution, LevelResult
from ddtune.engines.schedule import read_schedule
from ddtune.params import DecodeParams
from ddtune.report import ReportOptions, build_report
from ddtune.report.build import analyze

AR, DDTREE, DFLASH = DecodeParams("ar"), DecodeParams("ddtree", 16, 4), DecodeParams("dflash")
# output tok/s per level: ddtree wins at 1 and 4, AR at 16 (the crossover)
CROSSING = {
    AR: {"c1": 50.0, "c4": 180.0, "c16": 600.0},
    DDTREE: {"c1": 120.0, "c4": 260.0, "c16": 420.0},
    DFLASH: {"c1": 90.0, "c4": 200.0, "c16": 500.0},
}


def level(key: str, tps: float) -> dict:
    concurrency = int(key[1:])
    e2e = concurrency * 32 / tps
    d = Distribution(20, e2e, e2e, e2e, e2e)
    result = LevelResult(key, "closed", concurrency, None, requests=20, output_tps=tps)
    result.ttft_s, result.e2e_s, result.itl_s = d, d, d
    return result.to_dict()


def records(synth, tps: dict, noise: float = 0.01, repeats: int = 4, seed: int = 0) -> list:
    effects = [
        synth.Effect(AR, 100, 80, 1.0, baseline=True, passed=None),
        synth.Effect(DFLASH, 130, 100, 3.0, passed=None),
        synth.Effect(DDTREE, 180, 140, 4.0, passed=None),
    ]
    made = synth.make_records(effects, repeats=repeats, seed=seed)
    rng = random.Random(seed)
    for record in made:
        levels = [level(k, v * (1 + rng.gauss(0, noise))) for k, v in tps[record.params].items()]
        record.load = {"levels": levels, "requests": [], "max_rate": None}
    return made


def test_a_crossover_gives_a_schedule_with_its_gain(synth) -> None:
    found = analyze(records(synth, CROSSING), ReportOptions()).schedule
    assert found is not None and found.switched
    assert found.picks == {"c1": DDTREE.label(), "c4": DDTREE.label(), "c16": AR.label()}
    wire = found.schedule.to_wire()
    assert wire == [
        {"max_concurrency": 15, "config": DDTREE.to_wire()},
        {"max_concurrency": None, "config": AR.to_wire()},
    ]
    # equal weights: schedule 1+1+1 vs the best single (ddtree: 1+1+0.7): gain 3/2.7
    assert found.best_single == DDTREE.label()
    assert found.gain is not None and abs(found.gain.ratio - 3 / 2.7) < 0.02
    assert found.gain.low > 1.0 and found.gain.method == "paired"
    assert found.text.startswith("Schedule: ") and "over ddtree" in found.text
    assert any("weighs every closed-loop level alike" in n for n in found.notes)


def test_the_mix_weights_set_the_gain(synth) -> None:
    made = records(synth, CROSSING)
    light = analyze(made, ReportOptions(load_weights={"c1": 1.0, "c16": 0.05})).schedule
    heavy = analyze(made, ReportOptions(load_weights={"c1": 1.0, "c16": 1.0})).schedule
    assert light is not None and heavy is not None
    assert light.gain.ratio < heavy.gain.ratio  # little time at 16: little to gain
    assert not light.switched and light.text.startswith("One config: ")
    assert "the gain is below 2% (report.schedule_min_gain)" in light.text, light.text
    assert light.schedule.to_wire() == [{"max_concurrency": None, "config": DDTREE.to_wire()}]
    assert heavy.switched and heavy.typical in ("c1", "c16")


def test_one_config_everywhere_is_said_as_such(synth) -> None:
    flat = {
        p: {k: v * (3.0 if p == DDTREE else 1.0) for k, v in CROSSING[AR].items()} for p in CROSSING
    }
    found = analyze(records(synth, flat), ReportOptions()).schedule
    assert found is not None and not found.switched and found.schedule.is_single
    assert "recommended at every measured concurrency" in found.text


def test_noise_keeps_one_config(synth) -> None:
    # ddtree ahead by 1% at c1, ar by 1% at c16, under 10% noise: not worth switching
    close = {
        AR: {"c1": 100.0, "c16": 101.0},
        DDTREE: {"c1": 101.0, "c16": 100.0},
        DFLASH: {"c1": 50.0, "c16": 50.0},
    }
    found = analyze(records(synth, close, noise=0.10, repeats=3, seed=3), ReportOptions()).schedule
    assert found is not None and not found.switched and found.schedule.is_single


def test_results_json_section_and_schedule_file(synth, tmp_path) -> None:
    summary = build_report(records(synth, CROSSING), tmp_path, ReportOptions(plots=False))
    data = json.loads((tmp_path / "results.json").read_text())["report"]
    assert data["schedule"] == summary.schedule.schedule.to_wire()
    assert data["schedule"][-1]["max_concurrency"] is None
    assert data["schedule_choice"]["gain_low"] > 1.0
    md = (tmp_path / "report.md").read_text()
    assert md.index("## Load levels") < md.index("## Schedule")
    assert "| 1-15 | ddtree" in md and "| 16 and more | ar" in md
    assert "vLLM cannot take this schedule" in md  # ar vs ddtree: the varied knob is not K
    assert read_schedule(tmp_path / "results.json") == summary.schedule.schedule
    assert read_schedule(tmp_path / "schedule.json") == summary.schedule.schedule
    assert "Schedule: " in summary.terminal_table()
