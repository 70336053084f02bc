"""A schedule as each engine's launch command: `ddtune serve --schedule FILE`, vLLM's
`--speculative-config` JSON extended by `num_speculative_tokens_per_batch_size`, SGLang's
adaptive flags and config file, else the typical concurrency's config alone, said as such."""

from __future__ import annotations

import json

from ddtune.engines.schedule import Schedule, Tier
from ddtune.params import DecodeParams
from ddtune.services.scheduled import merge_speculative_config, scheduled_launch
from ddtune.services.spec import ServiceSpec

DFLASH, AR = DecodeParams("dflash"), DecodeParams("ar")
VLLM = [
    "vllm",
    "serve",
    "m",
    "--speculative-config",
    '{{"method": "ngram", "num_speculative_tokens": {K}}}',
]
SGLANG = ["python", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}"]


def spec(profile: str, command: list[str]) -> ServiceSpec:
    table = {"control": "process", "engine": profile, "command": command}
    return ServiceSpec.from_dict(
        {**table, "vars": {"K": 1, "steps": 1, "algorithm": "", "eagle_topk": 1}}
    )


def test_vllm_gets_its_per_batch_size_ranges_in_the_speculative_config(tmp_path) -> None:
    schedule = Schedule((Tier(2, DFLASH, {"K": 2}), Tier(7, DFLASH, {"K": 5}), Tier(None, AR)))
    launch = scheduled_launch(spec("vllm", VLLM), schedule, tmp_path)
    assert launch.switches and launch.tier.vars == {"K": 5} and not launch.files
    config = json.loads(launch.argv[-1])
    assert config == {
        "method": "ngram",
        "num_speculative_tokens": 5,
        "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 7, 5], [8, 1 << 16, 0]],
    }


def test_vllm_without_a_token_count_schedule_serves_the_typical_config(tmp_path) -> None:
    schedule = Schedule((Tier(2, DecodeParams("ddtree", 8, 2)), Tier(None, AR)))
    command = ["vllm", "serve", "m", "--mode", "{mode}"]
    launch = scheduled_launch(spec("vllm", command), schedule, tmp_path, typical=16)
    assert not launch.switches and launch.tier.params == AR
    assert "vLLM cannot take it" in launch.words and "16 concurrent requests" in launch.words
    assert merge_speculative_config(["x", "--speculative-config=nope"], {"a": 1}) is None
    inline = merge_speculative_config(["x", '--speculative-config={"k": 1}'], {"a": 2})
    assert inline == ["x", '--speculative-config={"k":1,"a":2}']


def test_sglang_adaptive_flags_and_file_ddtune_schedule_file(tmp_path) -> None:
    eagle = {"algorithm": "eagle3", "eagle_topk": 1}  # `method` is the config's own field
    schedule = Schedule(
        (Tier(3, DFLASH, {**eagle, "steps": 5}), Tier(None, DFLASH, {**eagle, "steps": 1}))
    )
    launch = scheduled_launch(spec("sglang", SGLANG), schedule, tmp_path)
    assert launch.argv[:5] == [*SGLANG[:4], "5"]
    assert launch.argv[5:7] == ["--speculative-adaptive", "--speculative-adaptive-config"]
    path = tmp_path / launch.argv[7].rsplit("/", 1)[1]
    assert json.loads(launch.files[path]) == {
        "1": {"candidate_steps": [5]},
        "4": {"candidate_steps": [1]},
    }
    ddtune = scheduled_launch(
        spec("ddtune", ["ddtune", "serve", "--budget", "{budget}"]), schedule, tmp_path
    )
    assert ddtune.argv[-2] == "--schedule"
    written = json.loads(next(iter(ddtune.files.values())))
    assert Schedule.from_wire(written["schedule"]) == schedule


def test_vllm_spec_with_the_config_as_a_variable_as_in_the_cpu_example(tmp_path) -> None:
    """examples/vllm-load-cpu.toml: mode ar throughout, K a var, `{spec}` the whole flag."""
    command = ["vllm", "serve", "m", "{spec}", "--served-model-name", "target"]
    service = ServiceSpec.from_dict(
        {"engine": "vllm", "command": command, "vars": {"K": 0, "spec": "--x=y"}}
    )

    def ngram(k: int, lookup: int = 3) -> dict:
        body = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": lookup}
        return {"K": k, "spec": "--speculative-config=" + json.dumps(body)}

    schedule = Schedule((Tier(1, AR, ngram(4)), Tier(3, AR, ngram(2)), Tier(None, AR, {"K": 0})))
    launch = scheduled_launch(service, schedule, tmp_path)
    assert launch.switches and launch.tier.vars["K"] == 4
    flag = launch.argv[3]
    assert flag.startswith("--speculative-config=")
    config = json.loads(flag.split("=", 1)[1])
    assert config["num_speculative_tokens_per_batch_size"] == [
        [1, 1, 4],
        [2, 3, 2],
        [4, 1 << 16, 0],
    ]
    assert config["prompt_lookup_max"] == 3
    other = Schedule((Tier(1, AR, ngram(4)), Tier(None, AR, ngram(2, lookup=5))))
    refused = scheduled_launch(service, other, tmp_path, typical=4)
    assert not refused.switches and "differ in more than the token count" in refused.words
    assert refused.tier.vars["K"] == 2  # the typical concurrency's config


def test_method_configs_through_method_args_switch_on_their_token_knob(tmp_path) -> None:
    """Configs named as methods (`ddtune.methods`) with `{method_args}` in the command: vLLM's
    ranges from ngram's num_draft_tokens, SGLang's candidate steps from eagle3's num_steps."""

    def named(name: str, **knobs: object) -> DecodeParams:
        return DecodeParams.from_wire({"method": name, "method_knobs": knobs})

    vllm = ServiceSpec.from_dict(
        {"engine": "vllm", "command": ["vllm", "serve", "m", "{method_args}"]}
    )
    tiers = (
        Tier(2, named("ngram", num_draft_tokens=2)),
        Tier(None, named("ngram", num_draft_tokens=5)),
    )
    launch = scheduled_launch(vllm, Schedule(tiers), tmp_path)
    assert launch.switches, launch.words
    config = json.loads(launch.argv[launch.argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == 5
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 2, 2], [3, 1 << 16, 5]]
    sglang = ServiceSpec.from_dict(
        {"engine": "sglang", "command": ["python", "-m", "sglang.launch_server", "{method_args}"]}
    )
    eagle = {"topk": 1, "drafter": "/d"}
    tiers = (Tier(3, named("eagle3", num_steps=5, **eagle)), Tier(None, named("ar")))
    launch = scheduled_launch(sglang, Schedule(tiers), tmp_path)
    assert launch.switches, launch.words
    assert launch.argv[launch.argv.index("--speculative-num-steps") + 1] == "5"
    path = tmp_path / launch.argv[-1].rsplit("/", 1)[1]
    assert json.loads(launch.files[path]) == {
        "1": {"candidate_steps": [5]},
        "4": {"candidate_steps": [0]},
    }


def test_an_eagle3_schedule_with_the_bundled_head_renders_for_both_engines(tmp_path) -> None:
    """EAGLE-3 with the bundled head, 5 draft tokens for 1-2 requests and 2 from 3 on: vLLM's
    per-batch-size K in the head's `--speculative-config`, SGLang's adaptive config over the
    head's EAGLE3 flags at topk 1 (vLLM drafts a chain and takes no topk; tests/integration/
    test_schedule_engines.py: the engines' own checks)."""
    head = "src/ddtune/assets/models/eagle3"

    def eagle3(steps: int, **knobs: int) -> DecodeParams:
        knobs = {"num_steps": steps, "drafter": head, **knobs}
        return DecodeParams.from_wire({"method": "eagle3", "method_knobs": knobs})

    schedule = Schedule((Tier(2, eagle3(5)), Tier(None, eagle3(2))))
    vllm = ServiceSpec.from_dict(
        {"engine": "vllm", "command": ["vllm", "serve", "m", "{method_args}"]}
    )
    launch = scheduled_launch(vllm, schedule, tmp_path)
    assert launch.switches, launch.words
    config = json.loads(launch.argv[launch.argv.index("--speculative-config") + 1])
    assert config == {
        "method": "eagle3",
        "model": head,
        "num_speculative_tokens": 5,
        "num_speculative_tokens_per_batch_size": [[1, 2, 5], [3, 1 << 16, 2]],
    }
    sglang = ServiceSpec.from_dict(
        {"engine": "sglang", "command": ["python", "-m", "sglang.launch_server", "{method_args}"]}
    )
    schedule = Schedule((Tier(2, eagle3(5, topk=1)), Tier(None, eagle3(2, topk=1))))
    launch = scheduled_launch(sglang, schedule, tmp_path)
    assert launch.switches, launch.words

    def value(flag: str) -> str:
        return launch.argv[launch.argv.index(flag) + 1]

    assert value("--speculative-algorithm") == "EAGLE3"
    assert value("--speculative-draft-model-path") == head
    assert value("--speculative-num-steps") == "5" and value("--speculative-eagle-topk") == "1"
    assert "--speculative-adaptive" in launch.argv
    path = tmp_path / launch.argv[-1].rsplit("/", 1)[1]
    assert json.loads(launch.files[path]) == {
        "1": {"candidate_steps": [5]},
        "3": {"candidate_steps": [2]},
    }
