"""The registry: one name per kind, looked up by name; unknown names are a UserError."""

from __future__ import annotations

import argparse

import pytest

from ddtune.cli.bench import register
from ddtune.engines import ENGINES, ServerEngine, get_engine
from ddtune.errors import UserError
from ddtune.services.spec import ServiceSpec


def test_every_registered_name_gives_its_kind():
    assert ENGINES == ("ddtune", "sglang", "vllm", "openai")
    for name in ENGINES:
        kind = get_engine(name)
        assert isinstance(kind, ServerEngine) and kind.name == name


@pytest.mark.parametrize("name", ["tgi", "", "SGLANG", ["ddtune"]])
def test_unknown_kind_names_the_allowed_ones(name):
    with pytest.raises(UserError, match="unknown engine .*ddtune, sglang, vllm, openai"):
        get_engine(name)


def test_the_cli_and_the_service_spec_offer_exactly_the_registered_kinds():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    bench = parser.parse_args(["bench", "--url", "http://x", "--engine", "vllm"])
    assert bench.engine == "vllm"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--url", "http://x", "--engine", "tgi"])
    for name in ENGINES:
        model = {"model": "m"} if name == "openai" else {}
        assert ServiceSpec.from_dict({"engine": name, "command": ["x"], **model}).engine == name
    with pytest.raises(UserError, match="service.engine"):
        ServiceSpec.from_dict({"engine": "tgi", "command": ["x"]})


def test_launchers_exist_exactly_for_the_kinds_that_build_commands():
    launchable = [name for name in ENGINES if get_engine(name).launch_help]
    assert launchable == ["sglang", "vllm"]
    with pytest.raises(UserError, match="has no launch command"):
        get_engine("ddtune").launch_command(None)
