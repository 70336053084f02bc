"""`write_atomic`: a reader polling the file while it is rewritten sees only whole versions."""

from __future__ import annotations

import threading

import pytest

from ddtune.report.render.atomic import atomic_path, write_atomic


def test_a_reader_never_sees_half_a_file(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "report.html"
    versions = [bytes([65 + i]) * 1_000_000 for i in range(3)]  # 1 MB each: many writes
    write_atomic(path, versions[0])
    seen: set[bytes] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            data = path.read_bytes()
            seen.add(data[:1] + bytes([len(set(data))]) + len(data).to_bytes(4, "big"))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(30):
            write_atomic(path, versions[i % 3])
    finally:
        done.set()
        reader.join()
    whole = {v[:1] + b"\x01" + len(v).to_bytes(4, "big") for v in versions}
    assert seen and seen <= whole, seen - whole
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary left
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_a_failed_write_keeps_the_old_file(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "plot.png"
    write_atomic(path, "old")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the plot failed")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plot.png"]
