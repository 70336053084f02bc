"""Escapes from the sandbox, each tried with the audit hook cleared first: all are contained.

Every case's program switches the harness's audit hook off (`CLEAR_HOOK`), then
tries to reach the host. Contained means: no trace on the host (`Host.escapes`)
and the case's own evidence, returned to the checker, shows the attempt ran
and hit a wall. The verdict-forging cases are in test_sandbox_forgery.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ddtune
from ddtune.bench.sandbox.checker import SandboxLimits, isolation_plan, run_program
from ddtune.bench.sandbox.isolation import fallback_plan

_spec = importlib.util.spec_from_file_location(
    "escape_kit", Path(__file__).with_name("escape_kit.py")
)
kit = sys.modules.setdefault("escape_kit", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(kit)
Escape, Host = kit.Escape, kit.Host

LIMITS = SandboxLimits(timeout_s=15.0, memory_mb=512)
LIBC = "    libc = ctypes.CDLL(None, use_errno=True)\n"

CASES = [
    Escape(
        "fork_exec_runs_sh_writing_tmp",
        "    import _posixsubprocess\n"
        "    r, w = os.pipe()\n"
        "    cmd = [b'/bin/sh', b'-c', b'echo x > /tmp/@M@-fork-exec']\n"
        "    pid = _posixsubprocess.fork_exec(cmd, [b'/bin/sh'], True, (w,), None, None,\n"
        "        -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None, False)\n"
        "    os.waitpid(pid, 0)\n"
        "    return 'done' if os.path.exists('/tmp/@M@-fork-exec') else 'sh did not run'\n",
    ),
    Escape(
        "open_with_dir_fd_of_tmp",
        "    tmp = os.open('/tmp', os.O_RDONLY)\n"
        "    fd = os.open('@M@-dirfd', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=tmp)\n"
        "    os.write(fd, b'x')\n"
        "    return 'done'\n",
    ),
    Escape(
        "subprocess_writes_tmp_shm_vartmp",
        "    sh = 'echo x > /tmp/@M@-sub; echo x > /dev/shm/@M@-sub; echo x > /var/tmp/@M@-sub'\n"
        "    subprocess.run(['sh', '-c', sh], check=True)\n"
        "    return 'done'\n",
    ),
    Escape(
        "ctypes_libc_open_and_system",
        LIBC
        + "    assert libc.open(b'/dev/shm/@M@-ctypes', os.O_CREAT | os.O_WRONLY, 0o644) >= 0\n"
        "    assert libc.system(b'echo x > /var/tmp/@M@-ctypes-system') == 0\n"
        "    return 'done'\n",
    ),
    Escape(
        "unix_socket_on_disk",
        "    try:\n"
        "        socket.socket(socket.AF_UNIX).connect('@SOCK@')\n"
        "        return 'connected'\n"
        "    except OSError:\n"
        "        return 'done'\n",
    ),
    Escape(
        "abstract_unix_socket",
        "    try:\n"
        "        socket.socket(socket.AF_UNIX).connect('\\0@ABSTRACT@')\n"
        "        return 'connected'\n"
        "    except OSError:\n"
        "        return 'done'\n",
    ),
    Escape(
        "tcp_to_host_loopback",
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', @PORT@), timeout=2)\n"
        "        return 'connected'\n"
        "    except OSError:\n"
        "        return 'done'\n",
    ),
    Escape(
        "setsid_grandchild_outlives_the_run",
        "    import time\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            os.execv('/bin/sleep', ['sleep', '@SLEEP@'])\n"
        "        os._exit(0)\n"
        "    time.sleep(0.5)\n"
        "    return 'done'\n",
    ),
    Escape(
        "kill_every_process_it_may_signal",
        "    import signal\n"
        "    try:\n"
        "        os.kill(-1, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "    return 'done'\n",
    ),
    Escape(
        "unmount_private_tmp",
        LIBC + "    unmounted = libc.umount2(b'/tmp', 2) == 0\n"
        "    open('/tmp/@M@-umount', 'w').write('x')\n"
        "    return 'unmounted /tmp' if unmounted else 'done'\n",
    ),
    Escape(
        "nested_userns_then_chroot_breakout",
        LIBC + "    if libc.unshare(0x10000000 | 0x00020000) != 0:\n"
        "        return 'no user namespace: ' + os.strerror(ctypes.get_errno())\n"
        "    libc.umount2(b'/tmp', 2)\n"
        "    os.makedirs('inner', exist_ok=True)\n"
        "    os.chroot('inner')\n"
        "    for _ in range(64):\n"
        "        os.chdir('..')\n"
        "    os.chroot('.')\n"
        "    seen = sorted(os.listdir('/'))\n"
        "    try:\n"
        "        open('/tmp/@M@-chroot', 'w').write('x')\n"
        "    except OSError:\n"
        "        pass\n"
        "    return 'done' if not {'work', 'home', 'boot'} & set(seen) else f'host root: {seen}'\n",
        # without root the tested code's uid is unmapped in its namespace: it gets no further one
        "def check(candidate):\n    got = candidate()\n"
        "    assert got == 'done' or got.startswith('no user namespace: Operation not'), got\n",
    ),
    Escape(
        "remount_root_read_write",
        LIBC + "    libc.mount(None, b'/', None, 32, None)\n"
        "    wrote = []\n"
        "    for path in ('/usr/@M@-rw', os.path.join(sys.prefix, 'lib', '@M@-rw'), '/etc/@M@-rw'):\n"
        "        try:\n"
        "            open(path, 'w').write('x')\n"
        "            wrote.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'done' if not wrote else wrote\n",
    ),
    Escape(
        "setuid_binaries_gain_nothing",
        "    run = lambda *argv: subprocess.run(argv, capture_output=True, input=b'').returncode\n"
        "    codes = [run('mount', '-t', 'tmpfs', 'none', '/task'),\n"
        "             run('su', '-c', 'touch /tmp/@M@-su'), run('umount', '/tmp')]\n"
        "    return 'done' if all(codes) else codes\n",
    ),
    Escape(
        "symlink_from_task_dir_to_tmp",
        "    os.symlink('/tmp/@M@-symlink', 'link')\n"
        "    open('link', 'w').write('x')\n"
        "    return 'done'\n",
    ),
    Escape(
        "host_sysv_shared_memory",
        LIBC + "    libc.shmat.restype = ctypes.c_void_p\n"
        "    shmid = libc.shmget(@SHM_KEY@, 0, 0)\n"
        "    if shmid < 0:\n"
        "        return 'done'\n"
        "    addr = libc.shmat(shmid, None, 0)\n"
        "    if addr is None or addr == ctypes.c_void_p(-1).value:\n"
        "        return 'done'\n"
        "    ctypes.memset(addr, 0x41, 1)\n"
        "    return 'attached and wrote'\n",
    ),
    Escape(
        "read_a_world_readable_host_file_in_dev_shm",
        "    try:\n"
        "        return open('@SECRET_FILE@').read()\n"
        "    except OSError:\n"
        "        return 'done'\n",
    ),
    Escape(
        "read_the_held_out_answer_key_and_repo",
        "    import glob\n"
        "    found = [p for p in ('@TASKS_FILE@', '@REPO@/pyproject.toml', '@REPO@/src/ddtune/__init__.py')\n"
        "             if os.path.exists(p)]\n"
        "    for root, dirs, files in os.walk('/'):\n"
        "        if root in ('/proc', '/usr', '/dev'):\n"
        "            dirs[:] = []\n"
        "        found += [os.path.join(root, n) for n in files + dirs if n in ('heldout.jsonl', 'ddtune')]\n"
        "    prefixes = ('/usr/lib/python3*', '/usr/local/lib/python3*', sys.prefix + '/lib/python3*')\n"
        "    for prefix in prefixes:\n"
        "        found += glob.glob(prefix + '/*-packages/ddtune*')\n"
        "    return 'done' if not found else found\n",
    ),
    Escape(
        "device_nodes_and_sysfs",
        "    seen = [p for p in ('/dev/vda', '/dev/sda', '/dev/mem', '/dev/kmsg', '/sys/fs/cgroup', '/run')\n"
        "            if os.path.exists(p)]\n"
        "    try:\n"
        "        os.mknod('/task/disk', 0o600 | 0o060000, os.makedev(8, 0))\n"
        "        seen.append('mknod')\n"
        "    except OSError:\n"
        "        pass\n"
        "    return 'done' if not seen else seen\n",
    ),
    Escape(
        "host_processes_are_invisible",
        "    pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
        "    return 'done' if max(pids) < 100 else f'{len(pids)} processes visible'\n",
    ),
    Escape(
        "read_a_key_of_the_inherited_session_keyring",
        LIBC
        + "    key = libc.syscall(@KEYCTL@, 10, -3, b'user', b'@M@', 0)  # KEYCTL_SEARCH in @s\n"
        "    if key < 0:\n"
        "        return 'done'\n"
        "    buf = ctypes.create_string_buffer(64)\n"
        "    libc.syscall(@KEYCTL@, 11, key, buf, 64)  # KEYCTL_READ\n"
        "    return buf.value.decode()\n",
    ),
    Escape(
        "twenty_15_mb_files_exceed_no_quota",
        "    written = 0\n"
        "    for i in range(20):\n"
        "        try:\n"
        "            with open(f'blob{i}', 'wb') as out:\n"
        "                out.write(b'x' * (15 * 1024 * 1024))\n"
        "            written += 15\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'done' if written <= 64 else f'{written} MB written'\n",
    ),
]


@pytest.fixture(scope="module")
def bait():
    with Host() as made:
        yield made


@pytest.fixture
def host(bait):
    bait.reset()  # each case starts from a clean host
    return bait


def test_the_cleared_hook_really_allows_programs_and_ctypes(host) -> None:
    """The prelude every case starts with turns the audit hook off (else the suite proves nothing)."""
    body = "    subprocess.run(['true'], check=True)\n    ctypes.CDLL(None).getpid()\n    return 'done'\n"
    case = Escape("hook_cleared", body)
    result = run_program(case.program(host), case.test_source(host), "f", LIMITS)
    assert result.outcome == "passed", result.detail
    hooked = case.program(host).replace(kit.CLEAR_HOOK, "")
    result = run_program(hooked, case.test_source(host), "f", LIMITS)
    assert result.outcome == "exception:PermissionError", result.detail


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_escape_is_contained(case, host) -> None:
    assert isolation_plan().mechanism == "namespaces"
    result = run_program(case.program(host), case.test_source(host), "f", LIMITS)
    assert host.escapes() == []
    assert result.outcome == "passed", f"the attempt did not run to its end: {result.detail}"


def test_without_namespaces_no_process_outlives_the_run(host) -> None:
    """The documented fallback: a setsid grandchild is killed with the rest of the run."""
    case = next(c for c in CASES if c.name == "setsid_grandchild_outlives_the_run")
    plan = fallback_plan("forced by a test")
    result = run_program(case.program(host), case.test_source(host), "f", LIMITS, plan)
    assert result.outcome == "passed", result.detail
    assert host.escapes() == []


def test_a_run_ends_by_itself_when_ddtune_dies(host) -> None:
    """ddtune killed mid-test: the harness's own deadline (wall clock + 10 s) ends the run."""
    case = Escape("orphaned", "    os.execv('/bin/sleep', ['sleep', '@SLEEP@'])\n")
    script = (
        "import json, sys\nfrom ddtune.bench.sandbox.checker import SandboxLimits, run_program\n"
        "program, test = json.load(sys.stdin)\nrun_program(program, test, 'f', SandboxLimits(1))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(ddtune.__file__).parents[1])}
    ddtune_process = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdin=subprocess.PIPE
    )
    assert ddtune_process.stdin is not None
    ddtune_process.stdin.write(json.dumps([case.program(host), case.test_source(host)]).encode())
    ddtune_process.stdin.close()
    sleeping = lambda: any(cmd.startswith("sleep ") for _, cmd in host.marked_processes())  # noqa: E731
    assert _wait_for(sleeping, 30), "the tested program never started"
    start = time.monotonic()
    ddtune_process.kill()
    ddtune_process.wait()
    assert _wait_for(lambda: host.escapes() == [], 1 + 10 + 5), host.escapes()
    assert time.monotonic() - start > 5  # it outlived ddtune until its own deadline


def _wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
