"""Files a reader never sees half-written: each goes to a temporary file in the same
folder, is flushed to disk (fsync) and then renamed over the old one (`os.replace`,
atomic on POSIX and Windows). A live report folder is rewritten after every pass of
a sweep while `ddtune sweep watch` and browsers read it (docs/report.md).

    with atomic_path(out_dir / "report.html") as tmp:   # write `tmp` by any means
        tmp.write_text(html, encoding="utf-8")
    write_atomic(out_dir / "report.md", markdown)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside `path`; renamed over `path` when the block succeeds."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a report is for reading
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes) -> None:
    """`path` holds `data` (text as UTF-8), whole, or keeps its old content."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
