"""BenchMatrix: defaults, strict parsing with errors that name the key, TOML files."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    ("table", "message"),
    [
        ({"sead": 1}, r"unknown key\(s\) bench\.sead"),
        ({"short": {"prompt_len": 5}}, r"bench\.short\.prompt_len"),
        ({"concurrency": "2"}, r"bench\.concurrency must be int; got '2'"),
        ({"concurrency": True}, r"bench\.concurrency must be int"),
        ({"temperature": "hot"}, r"bench\.temperature must be float"),
        ({"temperature": 3.0}, r"bench\.temperature must be between 0 and 2"),
        ({"short": {"max_tokens": 0}}, r"bench\.short\.max_tokens must be positive"),
        ({"coding": {"limit": -1}}, r"bench\.coding\.limit must be >= 0"),
        ({"coding": {"tasks_file": 3}}, r"bench\.coding\.tasks_file must be str or none"),
        ({"long": 5}, r"bench\.long must be a table"),
        ({"concurrency": 0}, r"bench\.concurrency must be positive"),
    ],
)
def test_bad_tables_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        BenchMatrix.from_dict(table)


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
