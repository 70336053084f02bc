"""`[cluster]` parsing, and the ray backend's start-up errors that need no cluster."""

from __future__ import annotations

import socket
import time

import pytest

import ddtune.sweep.run.ray.pool as ray_backend
from ddtune.errors import UserError
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.spec.cluster import ClusterTable

BASE = """
[sweep]
name = "c"
[space]
mode = ["ar"]
[service]
command = ["{python}", "-c", "pass", "{port}", "{gpu}"]
port = 9000
env = { A = "1" }
vars = { gpu = "0" }
"""

RAY = '[cluster]\nbackend = "ray"\naddress = "local"\n'


def slot(port: int | None = None, **keys: str) -> str:
    lines = "".join(f"{k} = {v}\n" for k, v in keys.items())
    service = f"[cluster.slots.service]\nport = {port}\n" if port else ""
    return f"[[cluster.slots]]\n{lines}{service}"


def error(text: str) -> UserError:
    with pytest.raises(UserError) as caught:
        parse_spec(BASE + text, source="c.toml")
    return caught.value


def test_default_is_the_local_backend_and_cluster_is_not_part_of_the_hash():
    local = parse_spec(BASE, source="c.toml")
    ray = parse_spec(BASE + RAY + slot(9001) + slot(9002), source="c.toml")
    assert local.cluster.backend == "local" and local.cluster.slots == ()
    assert ray.cluster.backend == "ray" and local.hash == ray.hash


def test_slots_override_the_service_and_merge_env_and_vars():
    spec = parse_spec(
        BASE
        + RAY
        + '[[cluster.slots]]\nname = "gpu1"\nplacement = { node_ip = "10.0.0.2" }\n'
        + '[cluster.slots.service]\nport = 9001\nenv = { CUDA_VISIBLE_DEVICES = "1" }\n'
        + 'vars = { gpu = "1" }\n'
        + slot(9002),
        source="c.toml",
    )
    first, second = spec.cluster.slots
    assert (first.name, second.name) == ("gpu1", "slot1")
    assert dict(first.service.env) == {"A": "1", "CUDA_VISIBLE_DEVICES": "1"}
    assert first.service.vars == {"gpu": "1"} and first.service.port == 9001
    assert first.endpoint == "10.0.0.2:9001" and second.endpoint == "127.0.0.1:9002"
    assert second.service.vars == {"gpu": "0"} and spec.service.port == 9000


def test_ray_without_slots_is_one_slot_on_the_service():
    (only,) = parse_spec(BASE + RAY, source="c.toml").cluster.slots
    assert only.name == "slot0" and only.service.port == 9000


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[cluster]\nbackend = "k8s"\n', "cluster.backend", "must be 'local' or 'ray'"),
        (RAY + slot(name='"a"'), "cluster.slots.0.service.port", "is required"),
        (RAY + slot(9001) + slot(9001), "cluster.slots.1.service.port", "both use 127.0.0.1:9001"),
        (
            RAY + slot(9001, name='"a"') + slot(9002, name='"a"'),
            "cluster.slots.1.name",
            "two slots",
        ),
        ("[cluster]\nmin_slots = 2\n", "cluster.min_slots", "only used with backend = 'ray'"),
        (RAY + "min_slots = 3\n" + slot(9001), "cluster.min_slots", "more than the 1 slot"),
        (
            '[cluster]\nbackend = "ray"\naddress = "http://x"\n',
            "cluster.address",
            "ray://host:port",
        ),
        (
            '[cluster]\nbackend = "ray"\naddress = "auto"\n[cluster.local]\nnum_cpus = 1\n',
            "cluster.local",
            "address = 'local'",
        ),
        (
            RAY + slot(9001, placement='{ rack = "a" }'),
            "cluster.slots.0.placement.rack",
            "unknown key",
        ),
        (
            RAY + '[[cluster.slots]]\n[cluster.slots.service]\nport = 9001\ncontrol = "x"\n',
            "cluster.slots.0.service.control",
            "unknown key",
        ),
    ],
)
def test_bad_cluster_tables_name_their_key(text, key, words):
    exc = error(text)
    assert exc.key == key and words in str(exc)
    assert str(exc).startswith("c.toml:") and "\n" not in str(exc)


def test_two_slots_on_different_nodes_may_share_a_loopback_port():
    pinned = [slot(9001, placement=f'{{ node_ip = "10.0.0.{i}" }}') for i in (1, 2)]
    spec = parse_spec(BASE + RAY + "".join(pinned), source="c.toml")
    assert [s.endpoint for s in spec.cluster.slots] == ["10.0.0.1:9001", "10.0.0.2:9001"]


def test_ray_not_installed_says_what_to_install(monkeypatch):
    def missing(name: str):
        raise ImportError(name)

    monkeypatch.setattr(ray_backend.importlib, "import_module", missing)
    with pytest.raises(UserError, match=r"pip install 'ddtune\[ray\]'") as caught:
        ray_backend.import_ray()
    assert caught.value.key == "cluster.backend"


class NeverInit:
    """A `ray` stand-in whose init would hang: the probe must fail before it."""

    def is_initialized(self) -> bool:
        return False

    def init(self, **options) -> None:
        raise AssertionError("ray.init must not be called for an address that does not answer")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_that_does_not_answer_fails_fast(scheme):
    table = ClusterTable(
        backend="ray", address=f"{scheme}127.0.0.1:{closed_port()}", start_timeout=5
    )
    started = time.monotonic()
    with pytest.raises(UserError, match="does not answer") as caught:
        ray_backend.connect(NeverInit(), table, "c")
    assert caught.value.key == "cluster.address" and time.monotonic() - started < 5


def test_auto_without_a_cluster_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    import ray._private.services as services  # noqa: PLC2701 (what pool._resolve reads)

    monkeypatch.setattr(services, "canonicalize_bootstrap_address", lambda *a, **k: None)
    with pytest.raises(UserError, match=r"ray start --head"):
        ray_backend.connect(NeverInit(), ClusterTable(backend="ray", address="auto"), "c")


def test_the_four_node_example_parses():
    from pathlib import Path

    from ddtune.sweep.plan import read_spec

    examples = Path(__file__).resolve().parents[3] / "examples"
    spec = read_spec(examples / "sglang-ddtree-ray.toml")
    single = read_spec(examples / "sglang-ddtree-systemd.toml")
    assert spec.cluster.backend == "ray" and spec.cluster.table.schedule == "by_pass"
    assert [s.placement.node_ip for s in spec.cluster.slots] == [
        f"10.0.0.{i}" for i in range(11, 15)
    ]
    assert {s.service.unit for s in spec.cluster.slots} == {"sglang-kimi.service"}
    assert spec.configs == single.configs and spec.baseline == single.baseline


def test_a_relative_workdir_is_refused():
    exc = error(RAY + 'workdir = "runs/x"\n')
    assert exc.key == "cluster.workdir" and "absolute path" in str(exc)
