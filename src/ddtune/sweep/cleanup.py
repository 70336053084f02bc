"""`ddtune sweep cleanup [--store S] [--dry-run]`: stop servers that killed sweep runs left.

A leftover is a ddtune-tagged instance whose owner (the runner that started
it, `ddtune.services.leftovers.Owner`) is gone. With `--store S` the store's
runner lock is taken first (a live runner of S: refused, nothing touched) and
every instance of S's workdir is stopped, as resuming S would; without it,
every leftover of this user is. Servers of a running sweep, instances of an
unknown owner outside `--store`, and processes ddtune did not start are never
stopped. See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

import ddtune.services.procs as procs
from ddtune.services.controllers.process import scope_prefix
from ddtune.services.leftovers import Holder, reclaim, tagged_instances
from ddtune.sweep.store.db import Store

GRACE_S, KILL_WAIT_S = 10.0, 10.0


def cleanup(store_path: Path | None, dry_run: bool, console: Console) -> int:
    """Stop the leftovers; 0 when none is left running, 1 when one could not be stopped."""
    if store_path is None:
        return _stop(tagged_instances(), ("leftover",), dry_run, console)
    store = Store(store_path, create=False)
    try:
        store.acquire()  # a live runner of this store: UserError, nothing is touched
        prefix = scope_prefix(store_path.parent.resolve())
        return _stop(tagged_instances(prefix), ("leftover", "unknown"), dry_run, console)
    finally:
        store.close()


def _stop(found: dict[str, Holder], stoppable: tuple[str, ...], dry: bool, out: Console) -> int:
    if not found:
        out.print("no ddtune leftovers found")
        return 0
    stopped, survivors = 0, 0
    for tag, holder in found.items():
        text = escape(holder.describe())
        if holder.kind not in stoppable:
            out.print(f"left alone: {text}")
            continue
        if dry:
            out.print(f"would stop: {text}")
            continue
        left = reclaim(tag, GRACE_S, KILL_WAIT_S)
        stopped += not left
        survivors += bool(left)
        verdict = (
            f"[red]could not stop[/] {escape(procs.describe(left))}: " if left else "stopped: "
        )
        out.print(verdict + text)
    if not dry:
        out.print(f"{stopped} stopped, {len(found) - stopped - survivors} left alone")
    return 1 if survivors else 0
