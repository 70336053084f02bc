"""The training corpus: generated function tasks mixed with Python standard library source.

The standard library of the running interpreter (found via `sysconfig`) is on
every machine, so the recipe needs no download. Files are split into a training
part and a held-out part (about one file in twenty, by a fixed hash of the
relative path) used only to measure perplexity.

The mix is document-level: each document is either one training task (prompt +
canonical body) or a chunk of a standard-library file, with tasks dominant.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import hashlib
import random
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from ddtune.errors import UserError
from ddtune.train.tasks import iter_tasks

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "ensurepip",
    "turtledemo",
    "__pycache__",
    "tkinter",
    "pydoc_data",
}
HELDOUT_EVERY = 20  # one stdlib file in 20 is held out for perplexity
CHUNK_CHARS = 1500  # stdlib files are cut into chunks about this long, at line ends


def stdlib_dir() -> Path:
    path = Path(sysconfig.get_paths()["stdlib"])
    if not path.is_dir():
        raise UserError(f"the Python standard library folder {path} does not exist")
    return path


def stdlib_files(split: str, root: Path | None = None) -> list[Path]:
    """Sorted `.py` files of the "train" or "heldout" split of the standard library."""
    if split not in ("train", "heldout"):
        raise UserError(f"split must be 'train' or 'heldout'; got {split!r}")
    root = root or stdlib_dir()
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS.intersection(rel.parts[:-1]):
            continue
        bucket = int(hashlib.sha256(str(rel).encode()).hexdigest()[:8], 16) % HELDOUT_EVERY
        if (bucket == 0) == (split == "heldout"):
            files.append(path)
    return files


def read_text(path: Path) -> str:
    """File text; undecodable bytes replaced (a few stdlib files have odd encodings)."""
    return path.read_bytes().decode("utf-8", errors="replace")


def chunk_text(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Cut at line ends into pieces of about `size` characters."""
    chunks, current, length = [], [], 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        length += len(line)
        if length >= size:
            chunks.append("".join(current))
            current, length = [], 0
    if current:
        chunks.append("".join(current))
    return chunks


def stdlib_chunks(split: str, seed: int, max_chars: int | None = None) -> list[str]:
    """Shuffled chunks of the split's files, at most `max_chars` characters in all."""
    chunks = [c for path in stdlib_files(split) for c in chunk_text(read_text(path))]
    random.Random(seed).shuffle(chunks)
    if max_chars is None:
        return chunks
    kept, total = [], 0
    for chunk in chunks:
        if total >= max_chars:
            break
        kept.append(chunk)
        total += len(chunk)
    return kept


def iter_documents(
    seed: int, task_share: float = 0.7, stdlib_chars: int = 20_000_000
) -> Iterator[list[str]]:
    """Endless mixed stream of documents, each a list of text pieces.

    A task is `[prompt, body]` (tokenized apart, so that training sees the same
    token boundary as a completion request); a stdlib chunk is `[chunk]`. The
    next document is a task while tasks hold less than `task_share` of the
    characters so far. Stdlib chunks cycle when exhausted.
    """
    if not 0.0 <= task_share <= 1.0:
        raise UserError(f"task_share must be between 0 and 1; got {task_share}")
    tasks = iter_tasks(seed, "train")
    chunks = stdlib_chunks("train", seed, stdlib_chars) if task_share < 1.0 else []
    task_chars = total_chars = position = 0
    while True:
        if not chunks or task_chars <= task_share * total_chars:
            task = next(tasks)
            pieces = [task.prompt, task.canonical_solution]
            task_chars += len(task.text())
        else:
            pieces = [chunks[position % len(chunks)]]
            position += 1
        total_chars += sum(map(len, pieces))
        yield pieces


def sample_documents(seed: int, count: int, task_share: float = 0.7) -> list[str]:
    """The first `count` documents of the mixed stream as plain texts (for the tokenizer)."""
    stream = iter_documents(seed, task_share)
    return ["".join(next(stream)) for _ in range(count)]
