"""The shared parts of every kind: config comparison, process witnesses, argv helpers."""

from __future__ import annotations

import pytest

from ddtune.engines import Launch, get_engine
from ddtune.engines.base import (
    check_extra,
    compare_config,
    flag_value,
    is_number,
    process_cmdline,
    process_environ,
)
from ddtune.errors import UserError
from ddtune.params import DecodeParams


def test_compare_config_lists_every_differing_field():
    assert compare_config({"a": 1, "b": None}, {"a": 1, "b": None, "extra": 5}) == []
    assert compare_config({"a": 1, "b": "x"}, {"a": 2}) == [
        "a: requested 1, server reports 2",
        "b: requested 'x', server reports None",
    ]


def test_witnesses_read_a_live_process_and_tolerate_a_dead_one(witness):
    launch = witness({"DDTUNE_KINDS_TEST": "yes"})
    assert process_environ(launch.main_pid)["DDTUNE_KINDS_TEST"] == "yes"
    assert process_cmdline(launch.main_pid) == ["sleep", "60"]
    dead = 2**22 + 12345  # above the default pid_max: no such process
    assert process_environ(dead) == {} and process_cmdline(dead) == []


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["x", "--draft-model-path", "/d"], "/d"),
        (["x", "--speculative-draft-model-path=/e"], "/e"),
        (["x", "--draft-model-path", "/d", "--draft-model-path=/f"], "/f"),
        (["x", "--draft-model-path"], None),
        (["x", "--draft-model-paths", "/d"], None),
        (None, None),
    ],
)
def test_flag_value(argv, value):
    names = ("--speculative-draft-model-path", "--draft-model-path")
    assert flag_value(argv, names) == value


def test_check_extra_refuses_owned_flags_and_plain_strings():
    check_extra(["--mem-fraction-static", "0.8"], ("--port",))
    with pytest.raises(UserError, match="--port is set by ddtune"):
        check_extra(["--port=8"], ("--port",))
    with pytest.raises(UserError, match="list of strings"):
        check_extra("--port 8", ("--port",))


def test_is_number_excludes_bools():
    assert is_number(3) and is_number(2.5)
    assert not is_number(True) and not is_number("3") and not is_number(None)


def test_a_kind_without_an_info_endpoint_reads_no_identity_and_expects_nothing():
    openai = get_engine("openai")
    assert openai.read_identity(None, "http://unused", Launch()) == ({}, {})
    assert openai.config_mismatches(DecodeParams("ddtree", 64, 8, 7), {}) == []
    assert openai.health_url("http://h:1") == "http://h:1/v1/models"
