"""ServiceSpec: strict parsing with errors that name the key, and placeholder rendering."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.services import ServiceSpec

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


def test_render_argv_env_and_hook_env():
    spec = ServiceSpec.from_dict({**BASE, "env": {"TOPK": "{topk}"}, "port": 9100})
    params = {"mode": "ddtree", "budget": 16, "topk": 4, "window": None}
    assert spec.render_argv(params) == [
        "srv",
        "--budget",
        "16",
        "--window",
        "none",
        "--port",
        "9100",
        "--x",
        "7",
    ]
    assert spec.render_env(params) == {"TOPK": "4"}
    hook_env = spec.hook_env({**params, "extra": 9})
    assert (
        hook_env["DDTUNE_WINDOW"] == "none"
        and hook_env["DDTUNE_EXTRA"] == "9"
        and hook_env["TOPK"] == "4"
    )
    assert spec.base_url == "http://127.0.0.1:9100"


def test_defaults_allow_ten_minute_loads_and_round_trip():
    spec = ServiceSpec.from_dict({**BASE, "timeouts": {"health": 900}})
    assert spec.timeouts.start >= 600 and spec.timeouts.health == 900
    assert ServiceSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    "table, words",
    [
        ({**BASE, "comand": ["x"]}, ["comand"]),
        ({**BASE, "timeouts": {"helth": 3}}, ["helth", "service.timeouts"]),
        ({**BASE, "timeouts": {"health": -1}}, ["service.timeouts.health"]),
        ({**BASE, "port": "80"}, ["service.port"]),
        ({**BASE, "kind": "docker"}, ["service.kind", "hooks"]),
        ({**BASE, "profile": "tgi"}, ["service.profile"]),
        ({**BASE, "command": "srv --port 1"}, ["service.command", "list"]),
        ({**BASE, "command": ["srv", "{bugdet}"]}, ["{bugdet}", "service.vars"]),
        ({**BASE, "env": {"A": 1}}, ["service.env.A"]),
        ({**BASE, "vars": {"budget": 3}}, ["service.vars.budget"]),
        ({"kind": "systemd"}, ["service.unit"]),
        ({"kind": "hooks", "hooks": {"start": "x"}}, ["hooks.stop"]),
        ({"kind": "hooks", "hooks": {"start": "x", "stop": "y", "status": "z"}}, ["status"]),
        ({**BASE, "kind": "hot", "profile": "vllm"}, ["hot", "ddtune"]),
        ({**BASE, "profile": "openai"}, ["service.model"]),
        ({**BASE, "gpu": "yes"}, ["service.gpu"]),
        ({"kind": "process"}, ["service.command"]),
    ],
)
def test_bad_tables_name_the_key(table, words):
    with pytest.raises(UserError) as err:
        ServiceSpec.from_dict(table)
    for word in words:
        assert word in str(err.value)
