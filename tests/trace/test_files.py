"""A trace folder: resumes per request, refuses other settings, and says what it cannot answer."""

from __future__ import annotations

import json

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.trace.files import read_header, request_path
from ddtune.trace.predict import Trace
from ddtune.trace.record import TraceSettings, record_trace
from ddtune.trace.sources import requests_from_prompts

PROMPTS = ["eat", "a toe", "tie a"]


def record(side, folder, **settings):
    requests = requests_from_prompts(PROMPTS, 10)
    return record_trace(side, requests, folder, TraceSettings(**settings))


def test_a_killed_recording_resumes_at_the_first_missing_request(sides, tmp_path):
    side = sides("qwen3", 4)
    record(side, tmp_path, windows=(None, 2), topk_max=3)
    first = request_path(tmp_path, "r0000")
    stamp = first.stat().st_mtime_ns
    request_path(tmp_path, "r0002").unlink()  # as if killed while tracing the last one
    record(side, tmp_path, windows=(None, 2), topk_max=3)
    assert first.stat().st_mtime_ns == stamp  # done requests are kept, not traced again
    assert len(Trace.read(tmp_path).data) == 3


def test_another_setting_is_refused_naming_what_differs(sides, tmp_path):
    side = sides("qwen3", 4)
    record(side, tmp_path, windows=(None,), topk_max=3)
    with pytest.raises(UserError, match=r"topk_max: 3 there, 4 now.*--fresh"):
        record(side, tmp_path, windows=(None,), topk_max=4)


def test_what_a_trace_cannot_answer_is_one_line(sides, tmp_path):
    side = sides("qwen3", 4)
    record(side, tmp_path, windows=(None,), topk_max=3)
    trace = Trace.read(tmp_path)
    cases = {
        "window 8 is not in the trace": DecodeParams("ddtree", 8, 2, 8),
        "topk 4 is above the trace's K = 3": DecodeParams("ddtree", 8, 4),
    }
    for message, params in cases.items():
        with pytest.raises(UserError, match=message):
            trace.predict(params)
    with pytest.raises(UserError, match="at most 3 draft tokens"):
        trace.predict(DecodeParams("dflash", 0, 1), query_length=9)
    with pytest.raises(UserError, match="no view with query length 2"):
        trace.predict(DecodeParams("dflash", 0, 1), query_length=2)


def test_a_folder_that_is_no_trace_or_of_another_version(tmp_path):
    with pytest.raises(UserError, match="is not a trace"):
        read_header(tmp_path)
    (tmp_path / "trace.json").write_text(json.dumps({"format": "ddtune-trace", "version": 99}))
    with pytest.raises(UserError, match="version 99"):
        read_header(tmp_path)


def test_query_lengths_outside_the_block_are_refused(sides, tmp_path):
    with pytest.raises(UserError, match="does not fit the drafter's block of 4"):
        record(sides("qwen3", 4), tmp_path, query_lengths=(5,))
