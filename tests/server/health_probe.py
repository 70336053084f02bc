"""A concurrent client for the limits tests, in its own process (so the uploading test
process's GIL does not count against the server): polls `/health` over one keep-alive
connection every `--every` seconds and samples the server's RSS, until its standard
input closes; then prints one JSON line: {"latencies": [...], "rss": [...]}.

    python health_probe.py --port 8000 --pid 1234
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import httpx
import psutil


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--every", type=float, default=0.02)
    args = parser.parse_args()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    server = psutil.Process(args.pid)
    latencies, rss = [], []
    with httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=10) as http:
        print("ready", flush=True)
        while not stop.is_set():
            started = time.perf_counter()
            status = http.get("/health").status_code
            latencies.append(time.perf_counter() - started if status == 200 else float("inf"))
            rss.append(server.memory_info().rss)
            stop.wait(args.every)
    print(json.dumps({"latencies": latencies, "rss": rss}), flush=True)


if __name__ == "__main__":
    main()
