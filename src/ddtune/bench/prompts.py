"""Deterministic benchmark prompts and their hash.

Default prompts are slices of Python standard-library source (the running
interpreter's, found with `sysconfig`), chosen by a seeded RNG from the sorted
file list: the same seed and Python version give the same prompts on every
machine. Files come from the held-out part of the stdlib (one file in twenty,
by a hash of the relative path, the rule `ddtune.train.corpus` uses), so the
bundled model never trained on them; slices that are mostly number literals
(data tables) are drawn again. Lengths are in characters
(`prompt_tokens * chars_per_token`), cut at a line end.

A user JSONL (`prompts_file`) replaces them: one `{"prompt": ..., "workload":
"short" | "long"}` per line (workload defaults to "short").
See docs/bench.md "Bench".
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows
from ddtune.train.corpus import HELDOUT_EVERY, SKIP_DIRS  # the same held-out rule

MAX_DRAWS = 50
WORD = re.compile(r"\w+")
MIN_FILE_CHARS = 4000


@dataclass(frozen=True)
class PromptSet:
    short: list[str]
    long: list[str]
    source: str  # "stdlib:<python version>" or the JSONL path

    def hash(self) -> str:
        """sha256 over the prompts (with their workload), 16 hex digits."""
        text = json.dumps({"short": self.short, "long": self.long}, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_prompt_set(
    seed: int,
    short: tuple[int, int],
    long: tuple[int, int],
    chars_per_token: float,
    prompts_file: str | None = None,
) -> PromptSet:
    """`short`/`long` are (n_prompts, prompt_tokens)."""
    if prompts_file:
        return read_prompts_file(prompts_file)
    files = stdlib_prompt_files()
    rng = random.Random(seed)

    def make(n: int, tokens: int) -> list[str]:
        return [slice_prompt(rng, files, int(tokens * chars_per_token)) for _ in range(n)]

    version = sysconfig.get_python_version()
    return PromptSet(make(*short), make(*long), f"stdlib:{version}")


def stdlib_prompt_files(root: Path | None = None) -> list[Path]:
    """Sorted held-out stdlib `.py` files long enough to slice prompts from."""
    root = root or Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)  # prune, keep the walk ordered
        for name in sorted(n for n in names if n.endswith(".py")):
            path = Path(folder, name)
            rel = path.relative_to(root)
            bucket = int(hashlib.sha256(str(rel).encode()).hexdigest()[:8], 16) % HELDOUT_EVERY
            if bucket == 0 and path.stat().st_size >= MIN_FILE_CHARS:
                files.append(path)
    files.sort()
    if not files:
        raise UserError(f"no standard-library source found under {root}; pass bench.prompts_file")
    return files


def slice_prompt(rng: random.Random, files: list[Path], n_chars: int) -> str:
    """A code-like slice (not a table of numbers) of about `n_chars` characters."""
    for _ in range(MAX_DRAWS):
        text = _slice(rng, files, n_chars)
        if looks_like_code(text):
            return text
    return text


def looks_like_code(text: str) -> bool:
    """Mostly names, few number literals: data tables tokenize far worse than code."""
    words = WORD.findall(text)
    numbers = sum(1 for w in words if w[0].isdigit())
    return bool(words) and numbers / len(words) < 0.25


def _slice(rng: random.Random, files: list[Path], n_chars: int) -> str:
    """About `n_chars` characters of one file from a random line on (wrapping to its start)."""
    text = files[rng.randrange(len(files))].read_bytes().decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    start = rng.randrange(len(lines))
    out, i = "", start
    while len(out) < n_chars:
        out += lines[i % len(lines)]
        i += 1
    cut = out.rfind("\n", 0, n_chars)
    return out[: cut + 1] if cut >= n_chars * 0.8 else out[:n_chars]


def read_prompts_file(path: str | Path) -> PromptSet:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"prompts file {path} does not exist")
    short: list[str] = []
    long: list[str] = []
    for number, row in jsonl_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
            raise UserError(
                f'{path}:{number}: expected {{"prompt": "...", "workload": "short"|"long"}}'
            )
        workload = row.get("workload", "short")
        if workload not in ("short", "long"):
            raise UserError(
                f"{path}:{number}: workload must be 'short' or 'long'; got {workload!r}"
            )
        (short if workload == "short" else long).append(row["prompt"])
    if not short and not long:
        raise UserError(f"prompts file {path} has no prompts")
    return PromptSet(short, long, str(path))
