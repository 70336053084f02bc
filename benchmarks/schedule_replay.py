"""A bursty load against the best single config and against a schedule: does switching pay?

1. Levels: every `--configs` candidate at each concurrency of the burst (closed loop,
   `--level-seconds` each, `--passes` passes, the configs set by POST /v1/ddtree/config on
   one server). Per level the config with the best mean output tok/s; the schedule runs it
   from that concurrency up to one below the next level (as the report's schedule does).
2. Predicted gain: per pass, the tokens the schedule's configs would serve over the burst
   (each level's tok/s x the seconds the burst spends there) over the best single config's;
   the paired interval over the passes (`stats.intervals.paired_log_ratio`).
3. Replay: two servers, one with the best single config, one with `--schedule FILE`; the same
   burst (concurrency stepping through `--burst`, e.g. 1:10,8:10 = 10 s at 1 then 10 s at 8,
   `--cycles` times) against each, in alternating order per pass. Measured gain: output tok/s
   of the schedule's server over the single config's, paired by pass, with its interval.

Servers listen on loopback, on free ports, and are stopped at the end. `--fake` runs the
same steps against a FAKE server (in this process) whose speed per config and concurrency
is known ground truth: ddtree decodes 3 tokens a step but its steps slow down fast with
requests in flight, ar 1 token a step with a nearly flat cost, so ddtree wins at 1 and ar at 8.

    PYTHONPATH=src python benchmarks/schedule_replay.py [--fake] [--burst 1:10,8:10]
        [--cycles 2] [--passes 3] [--configs "ar;ddtree 8 4;ddtree 16 4"] [--max-tokens 24]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from ddtune.engines.schedule import Schedule, Tier
from ddtune.params import DecodeParams
from ddtune.stats.intervals import RatioInterval, paired_log_ratio

AR = DecodeParams("ar")
PROMPTS = [
    "def fibonacci(n):",
    "The capital of France is",
    "import numpy as np\n\ndef softmax(x):",
    "Once upon a time, in a small village,",
    "SELECT name, COUNT(*) FROM users",
    "class Stack:\n    def __init__(self):",
]


# ---- servers ---------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    stop: Callable[[], None]

    def set_config(self, params: DecodeParams) -> None:
        reply = httpx.post(f"{self.url}/v1/ddtree/config", json=params.to_wire(), timeout=30)
        reply.raise_for_status()


def real_server(schedule: Path | None, params: DecodeParams, threads: int) -> Server:
    argv = [sys.executable, "-m", "ddtune.cli", "serve", "--port", "0", "--max-batch", "8"]
    argv += ["--schedule", str(schedule)] if schedule else _param_flags(params)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise SystemExit(f"ddtune serve did not start: {line!r}")
    port = dict(w.split("=", 1) for w in line.split()[1:])["port"]

    def stop() -> None:
        proc.terminate()
        proc.wait(30)

    return Server(f"http://127.0.0.1:{port}", stop)


def _param_flags(params: DecodeParams) -> list[str]:
    wire = params.to_wire()
    return [f"--{k}={wire[k]}" for k in ("mode", "budget", "topk", "window")]


class FakeSpeed:
    """FAKE ground truth: seconds per decoding step and tokens per step, by config and load."""

    STEP_S = 0.004

    @staticmethod
    def step(params: DecodeParams, in_flight: int) -> tuple[float, int]:
        if params.mode == "ar":
            return FakeSpeed.STEP_S * (1 + 0.1 * in_flight), 1
        return FakeSpeed.STEP_S * (1 + 1.2 * in_flight), 3


def fake_server(schedule: Schedule | None, params: DecodeParams) -> Server:
    """A FAKE OpenAI completions server: each request sleeps its steps at the speed
    `FakeSpeed` gives its config (picked by the schedule at admission) and the load."""
    state = {"params": params, "schedule": schedule, "in_flight": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/v1/ddtree/config":
                with lock:
                    state["params"] = state["params"].with_updates(body)  # type: ignore[union-attr]
                    state["schedule"] = None
                return self._send({"config": body})
            with lock:
                state["in_flight"] += 1  # type: ignore[operator]
                plan = state["schedule"]
                picked = plan.pick(state["in_flight"]).params if plan else state["params"]  # type: ignore[union-attr, arg-type]
            done = 0
            while done < body["max_tokens"]:
                seconds, tokens = FakeSpeed.step(picked, int(state["in_flight"]))  # type: ignore[arg-type, call-overload]
                time.sleep(seconds)
                done += tokens
            with lock:
                state["in_flight"] -= 1  # type: ignore[operator]
            self._send({"usage": {"completion_tokens": body["max_tokens"]}})

        def _send(self, data: dict) -> None:
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()

    return Server(f"http://127.0.0.1:{httpd.server_address[1]}", stop)


# ---- load ------------------------------------------------------------------------------------


def run_burst(url: str, burst: list[tuple[int, float]], max_tokens: int) -> float:
    """Closed loop whose concurrency follows `burst` [(clients, seconds)]: output tok/s."""
    start = time.monotonic()
    ends, t = [], start
    for clients, seconds in burst:
        t += seconds
        ends.append((t, clients))
    tokens = [0]
    lock = threading.Lock()

    def clients_now() -> int:
        now = time.monotonic()
        return next((n for end, n in ends if now < end), 0)

    def client(i: int) -> None:
        with httpx.Client(timeout=300) as http:
            k = i
            while time.monotonic() < ends[-1][0]:
                if i >= clients_now():
                    time.sleep(0.01)
                    continue
                body = {"prompt": PROMPTS[k % len(PROMPTS)], "max_tokens": max_tokens}
                body |= {"temperature": 0, "ignore_eos": True}
                reply = http.post(f"{url}/v1/completions", json=body)
                if reply.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {reply.status_code}: {reply.text[:300]}")
                with lock:
                    tokens[0] += int(reply.json()["usage"]["completion_tokens"])
                k += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(max(n for n, _ in burst))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tokens[0] / (time.monotonic() - start)


# ---- the steps -------------------------------------------------------------------------------


def measure_levels(
    server: Server, configs: list[DecodeParams], levels: list[int], args: argparse.Namespace
) -> dict[tuple[str, int], list[float]]:
    """(config label, concurrency) -> output tok/s per pass."""
    tps: dict[tuple[str, int], list[float]] = {}
    for p in range(args.passes):
        for params in configs if p % 2 == 0 else configs[::-1]:
            server.set_config(params)
            for n in levels:
                value = run_burst(server.url, [(n, args.level_seconds)], args.max_tokens)
                tps.setdefault((params.label(), n), []).append(value)
                print(f"  pass {p + 1} {params.label():22s} c{n}: {value:8.1f} tok/s", flush=True)
    return tps


def plan(
    configs: list[DecodeParams], levels: list[int], tps: dict, seconds: dict[int, float]
) -> tuple[Schedule, DecodeParams, RatioInterval]:
    """The schedule (best mean per level), the best single config over the burst, and the
    predicted gain per pass (tokens over the burst, schedule / single)."""
    mean = {k: sum(v) / len(v) for k, v in tps.items()}
    by_label = {c.label(): c for c in configs}
    picks = {n: max(configs, key=lambda c: mean[(c.label(), n)]) for n in levels}

    def served(pick: Callable[[int], DecodeParams], p: int) -> float:
        return sum(seconds[n] * tps[(pick(n).label(), n)][p] for n in levels)

    passes = len(next(iter(tps.values())))
    single = max(configs, key=lambda c: sum(served(lambda _n: c, p) for p in range(passes)))
    tiers: list[Tier] = []
    for i, n in enumerate(levels):
        last = levels[i + 1] - 1 if i + 1 < len(levels) else None
        if tiers and tiers[-1].params == picks[n]:
            tiers[-1] = Tier(last, picks[n])
        else:
            tiers.append(Tier(last, picks[n]))
    predicted = paired_log_ratio(
        [served(lambda n: picks[n], p) for p in range(passes)],
        [served(lambda _n: single, p) for p in range(passes)],
    )
    assert set(by_label) >= {t.params.label() for t in tiers}
    return Schedule(tuple(tiers)), single, predicted


def replay(
    make: Callable[[Schedule | None], Server], schedule: Schedule, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    burst = args.burst * args.cycles
    single, scheduled = make(None), make(schedule)
    a: list[float] = []
    b: list[float] = []
    try:
        for p in range(args.passes):
            order = [(single, a), (scheduled, b)] if p % 2 == 0 else [(scheduled, b), (single, a)]
            for server, out in order:
                out.append(run_burst(server.url, burst, args.max_tokens))
            print(
                f"  pass {p + 1}: single {a[-1]:8.1f} tok/s, schedule {b[-1]:8.1f} tok/s",
                flush=True,
            )
    finally:
        single.stop()
        scheduled.stop()
    return a, b


def words(ratio: RatioInterval) -> str:
    if ratio.low is None or ratio.high is None:
        return f"{ratio.ratio:.3f}x (n={ratio.n})"
    return f"{ratio.ratio:.3f}x [{ratio.low:.3f}, {ratio.high:.3f}] (paired, {ratio.n} passes)"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--fake", action="store_true", help="a FAKE server with known per-level speeds")
    p.add_argument("--burst", default="1:10,8:10", help="clients:seconds,... one cycle")
    p.add_argument("--cycles", type=int, default=2)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--level-seconds", type=float, default=8.0)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--configs", default="ar;ddtree 8 4;ddtree 16 4", help="mode [budget topk];...")
    p.add_argument("--threads", type=int, default=2, help="OMP threads of each ddtune serve")
    args = p.parse_args()
    args.burst = [(int(n), float(s)) for n, s in (x.split(":") for x in args.burst.split(","))]
    return args


def main() -> None:
    args = parse_args()
    configs = [
        DecodeParams(w[0], *(int(x) for x in w[1:3])) if len(w) > 1 else DecodeParams(w[0])  # type: ignore[arg-type]
        for w in (c.split() for c in args.configs.split(";"))
    ]
    levels = sorted({n for n, _ in args.burst})
    seconds = {n: args.cycles * sum(s for m, s in args.burst if m == n) for n in levels}
    what = (
        "FAKE server (known ground truth)"
        if args.fake
        else "ddtune serve, bundled models, this CPU"
    )
    print(f"{what}; burst {args.burst} x {args.cycles}; {args.passes} passes")
    folder = Path(tempfile.mkdtemp(prefix="schedule-replay-"))

    def make(schedule: Schedule | None, params: DecodeParams = AR) -> Server:
        if args.fake:
            return fake_server(schedule, params)
        path = None
        if schedule is not None:
            path = folder / "schedule.json"
            path.write_text(json.dumps({"schedule": schedule.to_wire()}))
        return real_server(path, params, args.threads)

    started = time.monotonic()
    probe = make(None)
    try:
        print("levels:")
        tps = measure_levels(probe, configs, levels, args)
    finally:
        probe.stop()
    schedule, single, predicted = plan(configs, levels, tps, seconds)
    print(f"schedule: {schedule.describe()}")
    print(f"best single config over the burst: {single.label()}")
    print(f"predicted gain: {words(predicted)}")
    if schedule.is_single:
        print("no crossover: one config is best at every level, so the schedule is that config")
        return
    print("replay:")
    a, b = replay(lambda s: make(s, single) if s else make(None, single), schedule, args)
    measured = paired_log_ratio(b, a)
    print(f"measured gain: {words(measured)} (predicted {words(predicted)})")
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    print(
        f"single {mean_a:.1f} tok/s, schedule {mean_b:.1f} tok/s; {time.monotonic() - started:.0f} s"
    )
    assert math.isfinite(measured.ratio)


if __name__ == "__main__":
    main()
