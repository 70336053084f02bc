"""psutil facts: identity, tag/group/descendant membership, listeners, SIGTERM -> SIGKILL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

from ddtune.services import procs

UP = "print('up', flush=True); "
SLEEP = UP + "import time; time.sleep(60)"
IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)
# exits 1 s after SIGTERM: it outlives its parent, orphaned (out of the tree) but running
SLOW_TERM = (
    "import signal, sys, time; "
    "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(0))); " + SLEEP
)
# a tagged parent whose child leaves the session and drops the tag (env -i + setsid)
UNTAGGED_GRANDCHILD = (
    "import subprocess, sys, time; "
    "c = subprocess.Popen([sys.executable, '-c', " + repr(SLOW_TERM) + "], env={}, "
    "start_new_session=True, stdout=subprocess.PIPE); c.stdout.readline(); "
    "print(c.pid, flush=True); time.sleep(60)"
)


def spawn(tag: str, code: str = SLEEP) -> subprocess.Popen[bytes]:
    """A tagged python child in its own session, returned once it runs `code`."""
    env = {**os.environ, procs.TAG_VAR: tag}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, stdout=subprocess.PIPE
    )
    return proc


def test_identity_is_pid_and_create_time():
    child = spawn("t-" + uuid.uuid4().hex)
    try:
        child.stdout.readline()
        info = procs.process_info(child.pid)
        assert info is not None and info.pgid == child.pid and not info.zombie
        assert abs(info.create_time - time.time()) < 5
        assert procs.is_alive(child.pid, info.create_time) and info.alive()
        assert not procs.is_alive(child.pid, info.create_time + 1), (
            "another start time is another process"
        )
    finally:
        child.kill()
        child.wait()
    assert procs.process_info(child.pid) is None and not info.alive()


def test_tagged_processes_are_found_and_escalated_to_sigkill():
    tag = "ddtune-test-" + uuid.uuid4().hex
    stubborn = spawn(tag + "-a", IGNORE_TERM)
    plain = spawn(tag + "-b")
    try:
        stubborn.stdout.readline()  # the TERM handler is installed
        plain.stdout.readline()  # exec'd: its environment carries the tag
        find = lambda: procs.find_instance(tag=tag, tag_prefix=True)  # noqa: E731
        assert {p.pid for p in find()} == {stubborn.pid, plain.pid}
        assert procs.find_instance(tag=tag) == [], "without tag_prefix the tag must match exactly"
        t0 = time.monotonic()
        assert procs.terminate(find, grace=0.5, kill_wait=3) == []
        assert time.monotonic() - t0 >= 0.5
        assert stubborn.wait(timeout=5) == -9 and plain.wait(timeout=5) == -15
    finally:
        for p in (stubborn, plain):
            p.kill()
            p.wait()


def test_descendants_without_the_tag_or_the_group_are_members():
    tag = "ddtune-test-" + uuid.uuid4().hex
    parent = spawn(tag, UNTAGGED_GRANDCHILD)
    try:
        grandchild = int(parent.stdout.readline())
        info = procs.process_info(grandchild)
        assert info is not None and info.pgid != parent.pid
        assert procs.TAG_VAR not in procs.read_environ(grandchild)
        found = {p.pid for p in procs.find_instance(tag=tag)}
        assert found == {parent.pid, grandchild}
        assert procs.terminate(lambda: procs.find_instance(tag=tag), grace=3, kill_wait=3) == []
        assert not procs.is_alive(grandchild), "terminate returned while the orphan still ran"
    finally:
        parent.kill()
        parent.wait()


def test_zombies_count_as_gone():
    tag = "ddtune-test-" + uuid.uuid4().hex
    child = spawn(tag, UP)  # prints and exits; not reaped until wait()
    try:
        child.stdout.readline()
        deadline = time.monotonic() + 5  # (while it exits, it runs with its memory gone)
        while time.monotonic() < deadline and not getattr(
            procs.process_info(child.pid), "zombie", False
        ):
            time.sleep(0.02)
        info = procs.process_info(child.pid)
        assert info is not None and info.zombie, "the child is an unreaped zombie"
        assert procs.find_instance(tag=tag) == [] and not procs.is_alive(child.pid)
        assert procs.find_instance(pgids=(child.pid,)) == []
    finally:
        child.wait()


def test_port_listeners_map_to_the_owning_pid():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert procs.port_listeners(port) == {}
        sock.listen()
        listeners = procs.port_listeners(port)
        assert list(listeners.values()) == [os.getpid()]
        assert [key.address for key in listeners] == [f"127.0.0.1:{port}"]
        assert procs.describe_pid(os.getpid()).startswith(f"pid {os.getpid()} (")
    assert procs.port_listeners(port) == {}
