"""The traffic file: checked line by line, sampled by the seed, replayed privately."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.bench.suites.config import TrafficTable
from ddtune.bench.suites.traffic import private_sample, read_traffic, traffic_requests
from ddtune.errors import UserError

GOOD = [
    {"prompt": "def f(x):", "max_tokens": 8, "temperature": 0.7},
    {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5},
    {"body": {"model": "prod", "prompt": "import os", "stop": ["\n"]}},
]


def write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_good_lines_are_read_with_their_kind_and_max_tokens(tmp_path: Path) -> None:
    logged = read_traffic(write(tmp_path / "t.jsonl", GOOD))
    assert [(r.line, r.chat, r.max_tokens) for r in logged] == [
        (1, False, 8),
        (2, True, 5),
        (3, False, 0),
    ]
    assert json.loads(logged[2].body_json)["model"] == "prod"  # the wrapper's body, as logged


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("{not json", "not valid JSON"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content must be a string"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"prompt": "x", "n": 2}, "n = 2"),
        ({"prompt": ["a", "b"]}, "neither a chat"),
        ({"prompt": "x", "temperature": 5}, "temperature must be a number in [0.0, 2.0]"),
    ],
)
def test_a_malformed_line_names_its_number_and_the_valid_lines_before(
    tmp_path: Path, bad: object, words: str
) -> None:
    path = write(tmp_path / "t.jsonl", [*GOOD, bad, GOOD[0]])
    with pytest.raises(UserError) as caught:
        read_traffic(path)
    message = str(caught.value)
    assert (
        f"{path}:4:" in message and words in message and "3 valid request(s) before it" in message
    )
    assert caught.value.key == "bench.traffic_file" and "\n" not in message


def test_sampling_is_reproducible_by_the_seed_and_keeps_file_order(tmp_path: Path) -> None:
    rows = [{"prompt": f"p{i}", "max_tokens": 4} for i in range(50)]
    logged = read_traffic(write(tmp_path / "t.jsonl", rows))
    table = TrafficTable(limit=10)
    first, again = traffic_requests(logged, table, 7), traffic_requests(logged, table, 7)
    other = traffic_requests(logged, table, 8)
    prompts = [json.loads(r.body_json or "")["prompt"] for r in first]
    assert first == again and first != other and len(first) == 10
    assert prompts == sorted(prompts, key=lambda p: int(p[1:]))


def test_temperature_is_overridden_only_when_the_spec_says_so(tmp_path: Path) -> None:
    logged = read_traffic(write(tmp_path / "t.jsonl", GOOD[:1]))
    as_logged = traffic_requests(logged, TrafficTable(), 0)[0]
    greedy = traffic_requests(logged, TrafficTable(temperature=0.0), 0)[0]
    assert json.loads(as_logged.body_json or "")["temperature"] == 0.7
    assert json.loads(greedy.body_json or "")["temperature"] == 0.0


def test_prompts_and_answers_stay_out_of_samples_unless_asked(tmp_path: Path) -> None:
    spec = traffic_requests(
        read_traffic(write(tmp_path / "t.jsonl", GOOD[1:2])), TrafficTable(temperature=0.0), 0
    )[0]
    sample = {"text": "secret answer", "sha256": "abc"}
    kept = private_sample(sample, spec, store_prompts=False)
    assert sample["text"] == "" and kept == "sha256:abc" and "prompt" not in sample
    assert len(sample["prompt_sha256"]) == 16 and sample["prompt_chars"] > 0
    stored = {"text": "secret answer", "sha256": "abc"}
    assert private_sample(stored, spec, store_prompts=True) == "secret answer"
    assert stored["prompt"] == [{"role": "user", "content": "hi"}]


def test_a_sampled_answer_is_kept_out_of_the_lossless_comparison(tmp_path: Path) -> None:
    """T > 0 as logged (0.7, or unset: OpenAI's 1.0) gives a placeholder every config shares."""
    logged = read_traffic(write(tmp_path / "t.jsonl", GOOD[:2]))
    specs = traffic_requests(logged, TrafficTable(), 0)
    kept = [private_sample({"text": "an answer", "sha256": "abc"}, s, False) for s in specs]
    assert kept == ["(sampled at T = 0.7: not compared)", "(sampled at T = 1: not compared)"]
    stored = private_sample({"text": "an answer", "sha256": "abc"}, specs[0], store_prompts=True)
    assert stored == "(sampled at T = 0.7: not compared)"


def test_a_missing_or_empty_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        read_traffic(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UserError, match="holds no requests"):
        read_traffic(tmp_path / "empty.jsonl")
