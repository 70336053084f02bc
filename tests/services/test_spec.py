"""ServiceSpec: strict parsing with errors keyed by the full path, and placeholder rendering."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.services import ServiceSpec
from ddtune.services.spec import old_names
from ddtune.tables import parse_table

BASE = {
    "command": [
        "srv",
        "--budget",
        "{budget}",
        "--window",
        "{window}",
        "--port",
        "{port}",
        "--x",
        "{extra}",
    ],
    "vars": {"extra": 7},
}
PARAMS = DecodeParams("ddtree", 16, 4, None)


def test_render_argv_env_and_hook_env():
    spec = ServiceSpec.from_dict({**BASE, "env": {"TOPK": "{topk}"}, "port": 9100})
    assert spec.render_argv(PARAMS) == [
        "srv",
        "--budget",
        "16",
        "--window",
        "none",  # DecodeParams.to_wire()
        "--port",
        "9100",
        "--x",
        "7",
    ]
    assert spec.render_argv(PARAMS, {"extra": "x y"})[-1] == "x y"  # the trial's variable wins
    assert spec.render_env(PARAMS) == {"TOPK": "4"}
    hook_env = spec.hook_env(PARAMS, {"extra": 9})
    assert (
        hook_env["DDTUNE_WINDOW"] == "none"
        and hook_env["DDTUNE_EXTRA"] == "9"
        and hook_env["DDTUNE_MODE"] == "ddtree"
        and hook_env["TOPK"] == "4"
    )
    assert spec.base_url == "http://127.0.0.1:9100"


def test_literal_braces_render_as_braces():
    spec = ServiceSpec.from_dict({"command": ["srv", '{{"k": {topk}}}']})
    assert spec.render_argv(PARAMS) == ["srv", '{"k": 4}']


def test_user_variable_cannot_shadow_a_parameter():
    spec = ServiceSpec.from_dict(BASE)
    with pytest.raises(UserError) as err:
        spec.render_argv(PARAMS, {"budget": 3})
    assert err.value.key == "vars.budget"


def test_defaults_allow_ten_minute_loads_and_round_trip():
    spec = ServiceSpec.from_dict({**BASE, "timeouts": {"health": 900}})
    assert spec.timeouts.start >= 600 and spec.timeouts.health == 900
    assert ServiceSpec.from_dict(spec.to_dict()) == spec
    hooks = ServiceSpec.from_dict({"control": "hooks", "hooks": {"start": "a", "stop": "b"}})
    assert ServiceSpec.from_dict(hooks.to_dict()) == hooks
    assert parse_table(ServiceSpec, BASE, where="service") == ServiceSpec.from_dict(BASE)


@pytest.mark.parametrize(
    "table, key, words",
    [
        ({**BASE, "comand": ["x"]}, "service.comand", ["unknown key", "command"]),
        ({**BASE, "timeouts": {"stopp": 3}}, "service.timeouts.stopp", ["stop", "quiesce"]),
        ({**BASE, "timeouts": {"health": -1}}, "service.timeouts.health", ["greater than 0"]),
        ({**BASE, "timeouts": {"stop": True}}, "service.timeouts.stop", ["number", "True"]),
        ({**BASE, "port": "80"}, "service.port", ["integer", "'80'"]),
        ({**BASE, "port": 70000}, "service.port", ["65535"]),
        ({**BASE, "control": "docker"}, "service.control", ["'docker'", "'hooks'"]),
        ({**BASE, "engine": "tgi"}, "service.engine", ["'tgi'", "'vllm'"]),
        ({**BASE, "command": "srv --port 1"}, "service.command", ["list"]),
        ({**BASE, "command": ["srv", 3]}, "service.command.1", ["string", "3"]),
        ({**BASE, "command": ["srv", "{bugdet}"]}, "service.command", ["{bugdet}", "vars"]),
        ({**BASE, "command": ["srv", "{bu"]}, "service.command", ["{{ }}"]),
        ({**BASE, "env": {"A": 1}}, "service.env.A", ["string"]),
        ({**BASE, "env": {"A": "{nope}"}}, "service.env", ["A:", "{nope}"]),
        ({**BASE, "vars": {"budget": 3}}, "service.vars", ["service.vars.budget", "{budget}"]),
        ({**BASE, "vars": {"x": [1]}}, "service.vars.x", ["string or a number"]),
        ({"control": "systemd"}, "service.unit", ["required", "systemd"]),
        ({"control": "hooks", "hooks": {"start": "x"}}, "service.hooks", ["hooks.stop"]),
        (
            {"control": "hooks", "hooks": {"start": "x", "stop": "y", "status": "z"}},
            "service.hooks.status",
            ["logs, start, stop"],
        ),
        ({**BASE, "control": "hot", "engine": "vllm"}, "service.engine", ["hot", "ddtune"]),
        ({**BASE, "engine": "openai"}, "service.model", ["openai"]),
        ({**BASE, "gpu": "yes"}, "service.gpu", ["'auto'", "'yes'"]),
        ({"control": "process"}, "service.command", ["process"]),
    ],
)
def test_bad_tables_name_the_key(table, key, words):
    with pytest.raises(UserError) as err:
        ServiceSpec.from_dict(table)
    assert err.value.key == key, err.value
    assert key in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_not_a_table():
    with pytest.raises(UserError) as err:
        ServiceSpec.from_dict(["srv"])  # type: ignore[arg-type]
    assert err.value.key == "service"


OLD = {"kind": "hot", "profile": "ddtune", "command": ["serve", "--port", "{port}"]}
NEW = {"control": "hot", "engine": "ddtune", "command": ["serve", "--port", "{port}"]}


def test_the_old_names_kind_and_profile_read_as_control_and_engine_with_a_note():
    assert ServiceSpec.from_dict(OLD) == ServiceSpec.from_dict(NEW)
    assert ServiceSpec.from_dict(OLD).to_dict() == ServiceSpec.from_dict(NEW).to_dict()
    assert old_names(OLD) == [
        '[service] kind is now called control: write control = "hot" (kind still reads)',
        '[service] profile is now called engine: write engine = "ddtune" (profile still reads)',
    ]
    assert old_names(NEW) == []
    assert "kind" not in ServiceSpec.from_dict(OLD).to_dict()  # written back: the new names


def test_an_old_and_a_new_name_with_different_values_is_an_error_naming_both():
    with pytest.raises(UserError) as err:
        ServiceSpec.from_dict({**NEW, "kind": "process"})
    assert err.value.key == "service.control"
    assert str(err.value) == (
        'both kind = "process" and control = "hot" are given; kind is the old name of '
        "control: keep control only"
    )
    with pytest.raises(UserError, match="profile = .vllm. and engine = .ddtune."):
        ServiceSpec.from_dict({**NEW, "profile": "vllm"})
    same = ServiceSpec.from_dict({**NEW, "kind": "hot", "profile": "ddtune"})  # agree: read
    assert same == ServiceSpec.from_dict(NEW)
