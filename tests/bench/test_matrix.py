"""BenchMatrix: defaults, strict parsing with errors that name the key, TOML files."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ddtune.bench import BenchMatrix
from ddtune.errors import UserError


def test_defaults_are_small_and_valid() -> None:
    matrix = BenchMatrix.from_dict({})
    assert matrix == BenchMatrix()
    assert matrix.temperature == 0.0 and matrix.concurrency == 1 and matrix.ignore_eos
    assert matrix.short.prompt_tokens == 100
    # the long prompt plus its output fit the bundled model's 512-token context
    assert matrix.long.prompt_tokens + matrix.long.max_tokens <= 512


def test_round_trip_through_dict() -> None:
    matrix = BenchMatrix.from_dict({"seed": 7, "short": {"n_prompts": 2}, "coding": {"limit": 3}})
    assert BenchMatrix.from_dict(matrix.to_dict()) == matrix
    assert matrix.short.n_prompts == 2 and matrix.short.max_tokens == 32
    assert matrix.coding.limit == 3


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ({"sead": 1}, "bench.sead", r"unknown key bench\.sead; expected one of .*seed"),
        ({"short": {"prompt_len": 5}}, "bench.short.prompt_len", r"expected one of .*n_prompts"),
        ({"concurrency": "2"}, "bench.concurrency", r"must be a valid integer; got '2'"),
        ({"concurrency": True}, "bench.concurrency", r"must be a valid integer; got True"),
        ({"temperature": "hot"}, "bench.temperature", r"must be a valid number; got 'hot'"),
        ({"temperature": 3.0}, "bench.temperature", r"less than or equal to 2; got 3\.0"),
        ({"short": {"max_tokens": 0}}, "bench.short.max_tokens", r"greater than 0; got 0"),
        ({"coding": {"limit": -1}}, "bench.coding.limit", r"greater than or equal to 0; got -1"),
        ({"coding": {"tasks_file": 3}}, "bench.coding.tasks_file", r"valid string; got 3"),
        ({"long": 5}, "bench.long", r"bench.long must be a table \(its keys: .*\); got 5"),
        ({"concurrency": 0}, "bench.concurrency", r"greater than 0; got 0"),
    ],
)
def test_bad_tables_name_the_key(table: dict, key: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        BenchMatrix.from_dict(table)
    assert info.value.key == key and str(info.value).find(key) >= 0


def test_direct_construction_validates_too() -> None:
    with pytest.raises(ValidationError):
        BenchMatrix(concurrency=0)


def test_ints_are_accepted_for_floats() -> None:
    assert BenchMatrix.from_dict({"temperature": 1}).temperature == 1.0


def test_from_toml_reads_the_bench_table_and_resolves_paths(tmp_path: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        '[service]\nkind = "process"\n\n[bench]\nseed = 3\nprompts_file = "prompts.jsonl"\n'
        '[bench.coding]\ntasks_file = "tasks/heldout.jsonl"\nn_samples = 2\n'
    )
    matrix = BenchMatrix.from_toml(spec)
    assert matrix.seed == 3 and matrix.coding.n_samples == 2
    assert matrix.prompts_file == str(tmp_path / "prompts.jsonl")
    assert matrix.coding.tasks_file == str(tmp_path / "tasks" / "heldout.jsonl")


def test_from_toml_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        BenchMatrix.from_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[bench\n")
    with pytest.raises(UserError, match="not valid TOML"):
        BenchMatrix.from_toml(bad)


def test_example_matrix_lists_the_defaults() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "bench" / "matrix.toml"
    assert BenchMatrix.from_toml(example) == BenchMatrix()
