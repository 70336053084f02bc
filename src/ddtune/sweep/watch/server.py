"""`ddtune sweep watch`: the live page of a sweep over HTTP (starlette + uvicorn).

    GET /             the page (refreshes itself every `interval_s` seconds)
    GET /live         the page's live part, HTML (what the page polls)
    GET /state.json   the same state for scripts: phase, counts, configs, ETA, failures
    GET /report/...   the report folder the runner rewrites after every pass

The store is read only when it changed (its file and WAL: size and mtime), so
a page left open all night costs a `stat` per poll. Binds 127.0.0.1 unless
told otherwise; `--port 0` takes a free port (printed). See docs/watch.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ddtune.report.headline import headline
from ddtune.server.listen import bind
from ddtune.sweep.plan.prepare import Sweep
from ddtune.sweep.run.common import signals_raise
from ddtune.sweep.store.db import runner_pid
from ddtune.sweep.watch.page import fragment_html, page_html
from ddtune.sweep.watch.state import LiveState, read_state

NO_STORE = {"Cache-Control": "no-store"}


class Snapshot:
    """The last `LiveState`, read again only when the store's files changed."""

    def __init__(self, store: Path, sweep: str | None) -> None:
        self.store, self.sweep = store, sweep
        self._key: tuple[tuple[int, int], ...] | None = None
        self._state: LiveState | None = None
        self._prepared: dict[Any, Sweep] = {}  # each sweep prepared once a watch
        self._lock = threading.Lock()

    def state(self) -> LiveState:
        with self._lock:
            key = self._stat()
            if self._state is None or key != self._key:
                self._state = read_state(self.store, self.sweep, self._prepared)
                self._key = key
            else:
                self._state.read_at = time.time()  # "running for ..." keeps counting
            return self._state

    def _stat(self) -> tuple[tuple[int, int], ...]:
        """(size, mtime) of the store, its WAL and its lock, and the runner's pid (a runner
        killed changes no file)."""
        stats = [(runner_pid(self.store) or 0, 0)]
        for suffix in ("", "-wal", ".lock"):
            path = self.store.with_name(self.store.name + suffix)
            try:
                st = path.stat()
                stats.append((st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                stats.append((0, 0))
        return tuple(stats)


def create_watch_app(snapshot: Snapshot, interval_s: float) -> Starlette:
    report_dir = snapshot.store.parent / "report"

    def page(request: Request) -> Response:
        return HTMLResponse(page_html(snapshot.state(), report_dir, interval_s), headers=NO_STORE)

    def live(request: Request) -> Response:
        return HTMLResponse(fragment_html(snapshot.state(), report_dir), headers=NO_STORE)

    def state_json(request: Request) -> Response:
        return JSONResponse(state_dict(snapshot.state()), headers=NO_STORE)

    routes = [
        Route("/", page),
        Route("/live", live),
        Route("/state.json", state_json),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/report", StaticFiles(directory=report_dir, check_dir=False)),
    ]
    return Starlette(routes=routes)


def state_dict(state: LiveState) -> dict[str, Any]:
    """The state as JSON: everything but the analysis, plus the answer's lines."""
    data = {
        f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.name != "summary"
    }
    data = {
        k: [dataclasses.asdict(x) for x in v] if k in ("configs", "now", "failures") else v
        for k, v in data.items()
    }
    data["store"] = str(state.store)
    lines = [] if state.summary is None else headline(state.summary).lines
    data["answer"] = [{**dataclasses.asdict(line), "text": line.text} for line in lines]
    return data


def serve_watch(
    store: Path, sweep: str | None, host: str, port: int, interval_s: float, say: Any = print
) -> int:
    """Serve until Ctrl-C or SIGTERM (then 0, as `ddtune serve`); `say` gets the line with
    the URL, and one when it stops."""
    snapshot = Snapshot(store, sweep)
    snapshot.state()  # a bad store or sweep name fails here, before binding (and is kept)
    sock = bind(host, port, backlog=64)
    url = f"http://{host}:{sock.getsockname()[1]}/"
    config = uvicorn.Config(
        create_watch_app(snapshot, interval_s), log_level="warning", lifespan="off"
    )
    say(f"watching {store} at {url} (Ctrl-C to stop)")
    try:
        with signals_raise():  # SIGTERM as Ctrl-C: uvicorn re-raises either after its stop
            asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    except KeyboardInterrupt:  # uvicorn stopped cleanly, then re-raised the signal
        pass
    finally:
        sock.close()
    say("stopped watching")
    return 0  # Ctrl-C is how a server is stopped, as for `ddtune serve`
