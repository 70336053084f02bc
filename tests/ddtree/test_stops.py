"""Stop tokens, stop strings, max_new_tokens and streaming release."""

from __future__ import annotations

from ddtune.ddtree.stops import OutputBuilder

CHARS = "abcdefghij"


def decode(ids: list[int]) -> str:
    return "".join(CHARS[i] for i in ids)


def test_stop_token_is_excluded_and_ends_output():
    out = OutputBuilder(decode, 10, stop_token_ids=[3])
    assert out.add([0, 1, 3, 4]) == [0, 1]
    assert (out.ids, out.finish_reason, out.final_text()) == ([0, 1], "stop", "ab")


def test_max_new_tokens_never_exceeded():
    out = OutputBuilder(decode, 3)
    out.add([0, 1])
    out.add([2, 4, 5])
    assert (out.ids, out.finish_reason) == ([0, 1, 2], "length")


def test_stop_string_across_rounds_cuts_exactly_and_streams_safely():
    out = OutputBuilder(decode, 20, stop_strings=["cde"])
    assert out.add([0, 1, 2]) == [0]  # "bc" could start "cde": held back
    assert out.add([3]) == [1]  # "cd" could still start it, "b" cannot
    assert out.add([4, 5]) == []
    assert (out.final_text(), out.ids, out.finish_reason) == ("ab", [0, 1], "stop")


def test_stop_string_inside_multichar_token_keeps_text_exact():
    vocab = ["ab", "cX", "Yd", "e"]
    out = OutputBuilder(lambda ids: "".join(vocab[i] for i in ids), 20, stop_strings=["XY"])
    out.add([0, 1, 2, 3])
    assert out.final_text() == "abc"
    assert out.ids == [0]  # token 1 ends after the cut point
    assert out.finish_reason == "stop"
