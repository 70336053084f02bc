"""`[cluster]` of a sweep spec: where the trials run, and the service slots of a Ray pool.

    [cluster]
    backend = "ray"            # "local" (default): one service driven by this process
    address = "auto"           # "auto" | "local" (start a cluster here) | "host:port" | "ray://host:port"
    min_slots = 1              # fewer live slots than this: the sweep stops with a message
    start_timeout = 60         # seconds to reach Ray and to start every slot actor
    schedule = "by_pass"       # a pass on one slot ("by_pass") or trials to any free slot
    workdir = "/var/tmp/ddtune"  # on every node: slots/<name>/ and trials/ (default: the store's folder)
    [cluster.local]            # only with address = "local": num_cpus, resources, labels
    [[cluster.slots]]
    name = "gpu0"              # default slot<i>
    placement = { node_ip = "10.0.0.11" }   # and/or labels = {...}, resources = {...}
    [cluster.slots.service]    # overrides of [service] for this slot: port (required),
    port = 30000               # host, env (merged), vars (merged), unit, cwd

`build_cluster` turns the table into a `Cluster` of `Slot`s, each with its own
`ServiceSpec`. Errors are `UserError`s keyed by the full path
(`cluster.slots.1.service.port`). Placement is checked against live Ray nodes
when the sweep starts (`sweep/run/ray/pool.py`). See docs/sweeps.md "Scale out".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field

from ddtune.errors import UserError
from ddtune.tables import StrictModel, name_rule

if TYPE_CHECKING:
    from ddtune.services.spec import ServiceSpec

BACKENDS = ("local", "ray")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ADDRESS_RE = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.\-]+:\d{1,5})$")


def _address(value: str) -> str:
    if not _ADDRESS_RE.match(value):
        raise ValueError("must be 'auto', 'local', 'host:port' or 'ray://host:port'")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("must be an absolute path (the same folder on every node)")
    return value


Amount = Annotated[float, Field(gt=0)]
Scalar = str | int | float | bool


class Placement(StrictModel):
    """Which Ray node a slot runs on: all given conditions must hold."""

    node_ip: str | None = None  # the node's address as Ray reports it
    labels: dict[str, str] = {}  # node labels (`ray start --labels`)
    resources: dict[str, Amount] = {}  # custom resources, also reserved by the slot

    def describe(self) -> str:
        parts = [f"node_ip={self.node_ip}"] if self.node_ip else []
        parts += [f"label {k}={v}" for k, v in sorted(self.labels.items())]
        parts += [f"resource {k}>={v:g}" for k, v in sorted(self.resources.items())]
        return ", ".join(parts) or "the driver's node"


class SlotService(StrictModel):
    """The `[service]` keys a slot may override; `port` is required."""

    port: Annotated[int, Field(ge=1, le=65535)]  # the slot's port
    host: str | None = None  # the slot's host
    env: dict[str, str] = {}  # merged over service.env
    vars: dict[str, Scalar] = {}  # merged over service.vars
    unit: str | None = None  # the slot's systemd unit
    cwd: str | None = None  # the slot's working directory


class SlotTable(StrictModel):
    # the slot's name (default slot<i>)
    name: Annotated[str, name_rule(32)] | None = None
    placement: Placement = Placement()  # which Ray node the slot runs on
    service: SlotService | None = None  # overrides of [service] for this slot


class LocalCluster(StrictModel):
    """How to start a cluster on this machine (`address = "local"`)."""

    num_cpus: Annotated[int, Field(ge=1)] | None = None  # CPUs the local cluster offers
    resources: dict[str, Amount] = {}  # custom resources the local cluster offers
    labels: dict[str, str] = {}  # node labels of the local cluster


class ClusterTable(StrictModel):
    # "local": one service driven by this process; "ray": service slots as Ray actors
    backend: Literal["local", "ray"] = "local"
    # "auto", "local" (start a cluster here), "host:port" or "ray://host:port"
    address: Annotated[str, AfterValidator(_address)] = "auto"
    # fewer live slots than this: the sweep stops with a message
    min_slots: Annotated[int, Field(ge=1)] = 1
    # seconds to reach Ray and to start every slot actor
    start_timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # "by_pass": a pass stays on one slot; "by_trial": trials go to any free slot
    schedule: Literal["by_pass", "by_trial"] = "by_pass"
    # absolute folder on every node for slots and trials (default: the store's folder)
    workdir: Annotated[str, AfterValidator(_absolute)] | None = None
    local: LocalCluster | None = None  # how to start a cluster here (address = "local")
    slots: list[SlotTable] = []  # the service slots, one [[cluster.slots]] each


@dataclass(frozen=True)
class Slot:
    """One service slot: its name, its own `ServiceSpec`, and where it runs."""

    name: str
    service: ServiceSpec
    placement: Placement
    key: str  # its spec key, e.g. cluster.slots.1

    @property
    def endpoint(self) -> str:
        """host:port, with a loopback host read as the slot's node address when pinned."""
        host = self.service.host
        if host in LOOPBACK and self.placement.node_ip:
            host = self.placement.node_ip
        return f"{host}:{self.service.port}"


@dataclass(frozen=True)
class Cluster:
    table: ClusterTable = ClusterTable()
    slots: tuple[Slot, ...] = ()

    @property
    def backend(self) -> str:
        return self.table.backend


ServiceMaker = Callable[[dict[str, Any]], "ServiceSpec"]


def build_cluster(table: ClusterTable, service: Mapping[str, Any], make: ServiceMaker) -> Cluster:
    """The resolved cluster; `make` parses a `[service]` table (the spec's own `_service`)."""
    if table.backend == "local":
        extra = sorted(table.model_fields_set - {"backend"})
        if extra:
            raise UserError(
                f"cluster.{extra[0]}: only used with backend = 'ray' (the local backend runs "
                "the one [service] here); set cluster.backend = 'ray' or remove it",
                key=f"cluster.{extra[0]}",
            )
        return Cluster(table)
    if table.local is not None and table.address != "local":
        raise UserError(
            f"cluster.local: only used with address = 'local'; got address {table.address!r}",
            key="cluster.local",
        )
    slots = tuple(_slot(i, row, service, make) for i, row in enumerate(table.slots))
    slots = slots or (Slot("slot0", make(dict(service)), Placement(), "cluster"),)
    _check_unique(slots)
    if table.min_slots > len(slots):
        raise UserError(
            f"cluster.min_slots: {table.min_slots} is more than the {len(slots)} slot(s) "
            "declared in [[cluster.slots]]",
            key="cluster.min_slots",
        )
    return Cluster(table, slots)


def _slot(index: int, row: SlotTable, service: Mapping[str, Any], make: ServiceMaker) -> Slot:
    key = f"cluster.slots.{index}"
    if row.service is None:
        raise UserError(
            f"{key}.service.port is required: each slot runs its own service on its own port "
            f"(add [cluster.slots.service] port = ... to slot {index})",
            key=f"{key}.service.port",
        )
    overrides = row.service.model_dump(exclude_unset=True)
    for merged in ("env", "vars"):
        if merged in overrides:
            overrides[merged] = {**dict(service.get(merged) or {}), **overrides[merged]}
    try:
        spec = make({**dict(service), **overrides})
    except UserError as exc:
        field = (exc.key or "").split(".")[1:2]
        if field and field[0] in overrides:
            raise UserError(
                str(exc).replace("service.", f"{key}.service.", 1),
                key=f"{key}.{exc.key}",
            ) from None
        raise
    return Slot(row.name or f"slot{index}", spec, row.placement, key)


def _check_unique(slots: tuple[Slot, ...]) -> None:
    names: dict[str, Slot] = {}
    endpoints: dict[str, Slot] = {}
    for slot in slots:
        if slot.name in names:
            raise UserError(
                f"{slot.key}.name: two slots are named {slot.name!r}", key=f"{slot.key}.name"
            )
        if slot.endpoint in endpoints:
            other = endpoints[slot.endpoint]
            raise UserError(
                f"{slot.key}.service.port: slots {other.name!r} and {slot.name!r} both use "
                f"{slot.endpoint}; give each slot its own host:port",
                key=f"{slot.key}.service.port",
            )
        names[slot.name] = endpoints[slot.endpoint] = slot


__all__ = [
    "BACKENDS",
    "Cluster",
    "ClusterTable",
    "LocalCluster",
    "Placement",
    "Slot",
    "SlotService",
    "SlotTable",
    "build_cluster",
]
