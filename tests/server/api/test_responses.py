"""Streaming text: deltas are final, stop strings never leak, usage arithmetic."""

from __future__ import annotations

from types import SimpleNamespace

from ddtune.server.api.responses import StreamText, usage


def decode(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def stream(text: str, stop: tuple[str, ...], step: int) -> tuple[list[str], StreamText]:
    st = StreamText(decode, stop)
    ids = [ord(c) for c in text]
    deltas = [st.feed(ids[i : i + step]) for i in range(0, len(ids), step)]
    return deltas, st


def test_deltas_concatenate_to_the_text() -> None:
    deltas, st = stream("hello world", (), 3)
    assert "".join(deltas) == "hello world"
    assert st.finish("hello world") == ""


def test_stop_string_prefix_is_held_back_and_never_emitted() -> None:
    deltas, st = stream("abcSTOPdef", ("STOP",), 1)
    assert "".join(deltas) == "abc"
    assert all("S" not in d for d in deltas)
    # the engine cuts its final text at the stop string; nothing more to send
    assert st.finish("abc") == ""


def test_held_back_prefix_that_is_not_a_stop_is_released() -> None:
    deltas, st = stream("abST", ("STOP",), 1)
    assert "".join(deltas) == "ab"  # "ST" may still become "STOP"
    assert st.finish("abSTx") == "STx"


def test_partial_characters_wait_for_completion() -> None:
    st = StreamText(lambda ids: "ab" + "\ufffd" * ids.count(0) + "c" * ids.count(1), ())
    assert st.feed([0]) == "ab"
    assert st.feed([1]) == "\ufffdc"  # only a trailing U+FFFD is held back


def test_usage_spec() -> None:
    stats = SimpleNamespace(rounds=4, acceptance_lengths=[3, 1, 2, 4], mean_batch_size=1.5)
    result = SimpleNamespace(token_ids=list(range(10)), stats=stats)
    out = usage(7, result)
    assert (out["prompt_tokens"], out["completion_tokens"], out["total_tokens"]) == (7, 10, 17)
    assert out["spec"] == {
        "rounds": 4,
        "accepted_tokens": 6,
        "mean_acceptance_length": 2.5,
        "mean_batch_size": 1.5,
    }
