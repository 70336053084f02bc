"""The `ddtune serve` process lifecycle: bind, load, announce readiness, drain on signals.

See docs/server.md "Server".

Timeline of one process:

1. Bind the listening socket first (so port 0 works and errors come early).
2. uvicorn starts serving; `/health` answers 503 while a background thread
   loads the weights and runs a 1-token warm-up generation.
3. Then `/health` turns 200 and exactly one line goes to stdout:
   `ready instance_id=<uuid> port=<port>`. Every log line goes to stderr.
4. SIGTERM or SIGINT: `/health` turns 503 and new generations get 503; queued
   and running requests may finish for `grace_seconds`, then are aborted;
   uvicorn closes its connections; the worker thread is joined; exit 0.
   A second signal aborts at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import uvicorn

from ddtune.errors import UserError
from ddtune.server.app import create_app
from ddtune.server.config import ServeConfig
from ddtune.server.listen import bind
from ddtune.server.state import ServerState

log = logging.getLogger("ddtune.server")

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(config: ServeConfig, early_signals: list[int] | None = None) -> int:
    """Serve until a signal; returns the process exit code.

    `early_signals` holds SIGTERM/SIGINT that arrived before the server could
    handle them (see `commands.run`); they start the drain at once.
    """
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    for name in ("ddtune", "uvicorn"):
        logging.getLogger(name).setLevel(logging.INFO)
    state = ServerState(config)  # resolves model folders: UserError before binding
    sock = bind(config.host, config.port)
    uv_config = uvicorn.Config(
        create_app(state),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
        timeout_keep_alive=5,
    )
    server = DrainingServer(uv_config, state, sock.getsockname()[1], early_signals or [])
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        state.close()
        sock.close()
    if server.load_error is not None:
        if isinstance(server.load_error, UserError):
            raise server.load_error
        print(f"ddtune: error: loading failed: {server.load_error}", file=sys.stderr)
        return 1
    return 0


class DrainingServer(uvicorn.Server):
    """uvicorn with our own readiness announcement and graceful drain."""

    def __init__(
        self, config: uvicorn.Config, state: ServerState, port: int, early_signals: list[int]
    ) -> None:
        super().__init__(config)
        self.state = state
        self.port = port
        self.early_signals = early_signals
        self.load_error: BaseException | None = None
        self._draining = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)  # listening from here on
        if not self._draining:
            self._spawn(self._load_and_announce())

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Drain on SIGTERM/SIGINT instead of uvicorn's immediate close (and no re-raise)."""
        loop = asyncio.get_running_loop()
        for sig in HANDLED_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        for early in self.early_signals[:1]:  # read after our handlers are in place
            self._on_signal(early)
        try:
            yield
        finally:
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int) -> None:
        if self._draining:  # a second signal: abort everything now
            log.warning("second %s: aborting in-flight requests", signal.Signals(sig).name)
            if self.state.worker is not None:
                self.state.worker.cancel_all()
            self.should_exit = True
            return
        log.info(
            "%s: draining (grace %.1fs)", signal.Signals(sig).name, self.state.config.grace_seconds
        )
        self._draining = True
        self.state.begin_shutdown()
        self._spawn(self._drain())

    async def _drain(self) -> None:
        worker = self.state.worker
        if worker is not None:
            idle = await asyncio.to_thread(worker.wait_idle, self.state.config.grace_seconds)
            if not idle:
                log.warning("grace period over: aborting %d request(s)", worker.pending)
                worker.cancel_all()
                await asyncio.to_thread(worker.wait_idle, 10.0)
        await asyncio.sleep(0.2)  # let the last responses flush
        self.should_exit = True

    async def _load_and_announce(self) -> None:
        try:
            await _in_daemon_thread(self.state.load)
        except asyncio.CancelledError:  # a signal ended the server while loading
            raise
        except BaseException as exc:  # reported by serve() as the exit status
            log.error("loading failed: %s", exc)
            self.state.phase = "failed"
            self.load_error = exc
            self.should_exit = True
            return
        if self._draining:
            return
        self.state.mark_serving()
        print(f"ready instance_id={self.state.identity.instance_id} port={self.port}", flush=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _in_daemon_thread(fn: Callable[[], None]) -> None:
    """Run `fn` on a daemon thread (a hung load never blocks process exit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[BaseException | None] = loop.create_future()

    def run() -> None:
        error: BaseException | None = None
        try:
            fn()
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server already exited
            loop.call_soon_threadsafe(_settle, future, error)

    threading.Thread(target=run, name="ddtune-load", daemon=True).start()
    error = await future
    if error is not None:
        raise error


def _settle(future: asyncio.Future[BaseException | None], error: BaseException | None) -> None:
    if not future.done():
        future.set_result(error)
