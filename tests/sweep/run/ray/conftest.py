"""Fixtures for distributed-sweep tests: specs against the sleepy fake server, a
thread-backed slot pool (the dispatcher without Ray), and a shared local Ray session."""

from __future__ import annotations

import contextlib
import functools
import queue
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtune.sweep.run.ray.slot import Finished, Lost, Progress, SlotRunner

SERVER = Path(__file__).with_name("sleepy_server.py")


def write_spec(
    spec_text,  # noqa: ANN001 - the sweep conftest's TOML pieces
    folder: Path,
    *,
    backend: str = "ray",
    slots: int = 2,
    repeats: int = 2,
    budgets: tuple[int, ...] = (4, 8),
    configs: str = "",
    cluster: str = 'address = "local"',
    token_delay: float | str = 0.05,
    attempts: int = 2,
    name: str = "sleepy",
    sweep: str = "",
) -> Path:
    """A sweep of `budgets` × `repeats` trials against sleepy_server.py; `sweep` adds lines
    to the [sweep] table (e.g. a baseline)."""
    free_port = spec_text.free_port
    slot_tables = "".join(
        f'\n[[cluster.slots]]\nname = "s{i}"\nservice = {{ port = {free_port()} }}\n'
        for i in range(slots)
    )
    cluster_text = (
        f'[cluster]\nbackend = "ray"\n{cluster}\n{slot_tables}' if backend == "ray" else ""
    )
    space = f'[space]\nmode = ["ddtree"]\nbudget = {list(budgets)}\ntopk = [2]\n' if budgets else ""
    text = textwrap.dedent(f"""
        [sweep]
        name = "{name}"
        repeats = {repeats}
        order = "interleaved"
        {sweep}

        {space}
        {configs}

        [service]
        command = ["{sys.executable}", "{SERVER}", "--port", "{{port}}", "--mode", "{{mode}}",
                   "--budget", "{{budget}}", "--topk", "{{topk}}", "--window", "{{window}}",
                   "--token-delay", "{{delay}}"]
        port = {free_port()}
        generations = 1
        gpu = "off"
        vars = {{ delay = "{token_delay}" }}
        [service.timeouts]
        stop = 5
        quiesce = 10
        start = 30
        health = 30

        """)
    text += spec_text.bench(0, (2, 20, 8), (1, 40, 8)) + "\n" + spec_text.retry(attempts)
    path = folder / "spec.toml"
    path.write_text(text + "\n" + cluster_text)
    return path


@pytest.fixture
def sleepy_spec(spec_text) -> Callable[..., Path]:  # noqa: ANN001
    """`write_spec(folder, **options)`: a spec against sleepy_server.py."""
    return functools.partial(write_spec, spec_text)


class ThreadPool:
    """A `SlotPool` of threads: one `SlotRunner` per slot, one thread per attempt.

    `kill_when(slot, phase)` → True kills that slot there (its service is stopped
    and the attempt comes back as `Lost`), once; `rejoin=True` lets killed slots
    start again."""

    def __init__(
        self,
        spec,
        root: Path,
        store: str,
        kill_when: Callable[[str, str], bool] | None = None,
        rejoin: bool = False,
    ) -> None:
        self.spec, self.root, self.kill_when, self.allow_rejoin = spec, root, kill_when, rejoin
        self.store = store
        self.runners: dict[str, SlotRunner] = {}
        self.busy: set[str] = set()
        self.dead: set[str] = set()
        self.killed: list[str] = []
        self.events: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []

    def start(self):
        for slot in self.spec.cluster.slots:
            self.runners[slot.name] = SlotRunner(
                slot.name, slot.service, self.spec.bench, self.root
            )
        return {name: r.info() for name, r in self.runners.items()}, {}

    def submit(self, slot, task) -> None:
        self.busy.add(slot)
        thread = threading.Thread(target=self._run, args=(slot, self.runners[slot], task))
        self.threads.append(thread)
        thread.start()

    def _run(self, slot, runner, task) -> None:
        report = runner.run(task)
        dead = slot in self.dead
        self.events.put(Lost(slot, "killed by the test") if dead else Finished(slot, report))

    def poll(self, timeout):
        events = []
        with contextlib.suppress(queue.Empty):
            events.append(self.events.get(timeout=timeout))
        for event in events:
            self.busy.discard(event.slot)
        for slot in sorted(self.busy - self.dead):
            state = self.runners[slot].state()
            if self.kill_when and not self.killed and self.kill_when(slot, state["phase"]):
                self.killed.append(slot)
                self.dead.add(slot)
                self.runners[slot].close()
            events.append(Progress(slot, state["phase"], state["ready"]))
        return events

    def rejoin(self, retired):
        back = {}
        for name in retired:
            if self.allow_rejoin and name in self.dead:
                slot = next(s for s in self.spec.cluster.slots if s.name == name)
                self.runners[name] = SlotRunner(
                    name, slot.service, self.spec.bench, self.root, self.spec.name, self.store
                )
                self.dead.discard(name)
                back[name] = self.runners[name].info()
        return back

    def close(self):
        notes = []
        for _name, runner in self.runners.items():
            notes += runner.close()
        for thread in self.threads:
            thread.join(timeout=30)
        return notes


@pytest.fixture
def thread_pool(monkeypatch):
    """Make the ray backend run on a ThreadPool; returns a setter for its options."""
    import ddtune.sweep.run.ray.driver as dispatch

    made: list[ThreadPool] = []

    def use(**options) -> list[ThreadPool]:
        def factory(spec, root, store):
            made.append(ThreadPool(spec, root, store, **options))
            return made[-1]

        monkeypatch.setattr(dispatch, "_ray_pool", factory)
        return made

    return use


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray cluster for every test that needs one (2 CPUs, no dashboard)."""
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="warning",
        namespace="ddtune-tests",
    )
    yield ray
    ray.shutdown()
