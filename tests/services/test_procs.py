"""/proc facts: identity, tag and group membership, listeners, SIGTERM -> SIGKILL escalation."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

from ddtune.services import procs

IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"


def spawn(tag: str, code: str = "import time; time.sleep(60)") -> subprocess.Popen:
    env = {**os.environ, procs.TAG_VAR: tag}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, stdout=subprocess.PIPE
    )
    return proc


def test_identity_is_pid_and_start_time():
    child = spawn("t-" + uuid.uuid4().hex)
    try:
        info = procs.read_stat(child.pid)
        assert info is not None and info.pgid == child.pid and not info.zombie
        assert abs(procs.start_time_epoch(info.start_ticks) - time.time()) < 5
        assert procs.is_alive(child.pid, info.start_ticks)
        assert not procs.is_alive(child.pid, info.start_ticks + 1), (
            "another start time is another process"
        )
    finally:
        child.kill()
        child.wait()
    assert procs.read_stat(child.pid) is None


def test_tagged_processes_are_found_and_escalated_to_sigkill():
    tag = "ddtune-test-" + uuid.uuid4().hex
    stubborn = spawn(tag + "-a", IGNORE_TERM)
    stubborn.stdout.readline()  # the TERM handler is installed
    plain = spawn(tag + "-b")
    try:
        find = lambda: procs.find_instance(tag=tag, tag_prefix=True)  # noqa: E731
        assert {p.pid for p in find()} == {stubborn.pid, plain.pid}
        t0 = time.monotonic()
        assert procs.terminate(find, grace=0.5, kill_wait=3) == []
        assert time.monotonic() - t0 >= 0.5
        assert stubborn.wait(timeout=5) == -9 and plain.wait(timeout=5) == -15
    finally:
        for p in (stubborn, plain):
            p.kill()
            p.wait()


def test_port_listeners_map_to_the_owning_pid():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert procs.port_listeners(port) == {}
        sock.listen()
        assert list(procs.port_listeners(port).values()) == [os.getpid()]
    assert procs.port_listeners(port) == {}
