"""compare_outputs: identical, or the first diverging request and character."""

from __future__ import annotations

from ddtune.bench import compare_outputs
from ddtune.bench.lossless import output_hash


def test_identical() -> None:
    verdict = compare_outputs(["ab", "cd"], ["ab", "cd"])
    assert verdict.identical and verdict.detail == "identical" and verdict.request is None


def test_diverged_at_request_and_char() -> None:
    verdict = compare_outputs(["abc", "hello world"], ["abc", "hello there"])
    assert not verdict.identical
    assert (verdict.request, verdict.char) == (1, 6)
    assert verdict.detail == "diverged at request 1, char 6"


def test_prefix_diverges_at_the_shorter_length() -> None:
    verdict = compare_outputs(["abcdef"], ["abc"])
    assert (verdict.request, verdict.char) == (0, 3)


def test_different_request_counts() -> None:
    verdict = compare_outputs(["a", "b"], ["a"])
    assert not verdict.identical and verdict.request == 1
    assert "baseline has 2 outputs, this run 1" in verdict.detail


def test_output_hash_is_sha256() -> None:
    assert output_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
