"""Files a reader never sees half-written: each goes to a temporary file in the same
folder, is flushed to disk (fsync) and then renamed over the old one (`os.replace`,
atomic on POSIX and Windows). A live report folder is rewritten after every pass of
a sweep while `ddtune sweep watch` and browsers read it (docs/report.md).

    with atomic_path(out_dir / "report.html") as tmp:   # write `tmp` by any means
        tmp.write_text(html, encoding="utf-8")
    write_atomic(out_dir / "report.md", markdown)

A whole report is written together or not at all: into a fresh hidden folder
inside `out_dir` (`staged_folder`), whose files replace the folder's only once every one
was written; the previous report's files the new one does not write are removed
(the names each report wrote are kept in `MANIFEST`, so nothing else in the folder
is touched). A report that fails leaves `out_dir` as it was; `replace_with_notice`
puts a notice in place of a report that can no longer be rewritten, so an old
answer is never read as the current one.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MANIFEST = ".ddtune-report.json"  # the files the last report wrote into its folder


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


@contextlib.contextmanager
def staged_folder(out_dir: Path) -> Iterator[Path]:
    """A new empty hidden folder inside `out_dir` to write a whole report into; when the
    block succeeds its files replace `out_dir`'s (module doc); when it fails `out_dir` is as
    it was (the hidden folder removed either way)."""
    stage = Path(tempfile.mkdtemp(prefix=".ddtune-report.", suffix=".new", dir=out_dir))
    try:
        yield stage
        swap_in(stage, out_dir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def swap_in(stage: Path, out_dir: Path) -> list[str]:
    """Move every file of `stage` into `out_dir` (each by `os.replace`), then remove the
    files the previous report wrote that this one does not; the names moved."""
    names = sorted(p.name for p in stage.iterdir() if p.is_file())
    before = written_files(out_dir)
    for name in names:
        os.replace(stage / name, out_dir / name)
    write_atomic(out_dir / MANIFEST, json.dumps(names) + "\n")
    for stale in sorted(set(before) - set(names)):
        (out_dir / stale).unlink(missing_ok=True)
    return names


def written_files(out_dir: Path) -> list[str]:
    """The names the last report wrote into `out_dir` (its manifest); [] without one."""
    try:
        names = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and n != MANIFEST]


def replace_with_notice(out_dir: Path, title: str, lines: list[str]) -> None:
    """The report in `out_dir` replaced by a notice (report.md and report.html saying
    `title` and `lines`); the old report's other files removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with staged_folder(out_dir) as stage:
        write_atomic(stage / "report.md", "\n\n".join([f"# {title}", *lines]) + "\n")
        body = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
        page = f"<!doctype html><title>{html.escape(title)}</title><h1>{html.escape(title)}</h1>"
        write_atomic(stage / "report.html", page + body + "\n")


__all__ = [
    "MANIFEST",
    "atomic_path",
    "replace_with_notice",
    "staged_folder",
    "swap_in",
    "write_atomic",
    "written_files",
]
