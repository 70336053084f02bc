"""Issue 28 on a live `ddtune serve`: every real client reads its early 413.

50 posts of a 10 MB prompt from each of httpx, requests, the openai SDK and curl,
against a server whose body limit is 1 MB: each reads the 413 in the OpenAI error
shape (the lingering close in `server/limits.py` drains what the client still
sends instead of resetting the connection under it), while a concurrent client in
another process sees `/health` answer in under 100 ms and the server's RSS stays
flat (all 2 GB of bodies are read and dropped 64 KiB at a time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import requests

POSTS = 50
PROMPT = "x" * 10_000_000
BODY = json.dumps({"model": "tiny", "prompt": PROMPT, "max_tokens": 1}).encode()
JSON = {"Content-Type": "application/json"}
PROBE = Path(__file__).parent / "health_probe.py"

Answer = tuple[int, str]  # (status, error code)


def with_httpx(url: str, _: Path) -> list[Answer]:
    with httpx.Client(timeout=60) as http:
        answers = [http.post(url, content=BODY, headers=JSON) for _ in range(POSTS)]
    return [(a.status_code, a.json()["error"]["code"]) for a in answers]


def with_requests(url: str, _: Path) -> list[Answer]:
    with requests.Session() as session:
        answers = [session.post(url, data=BODY, headers=JSON, timeout=60) for _ in range(POSTS)]
    return [(a.status_code, a.json()["error"]["code"]) for a in answers]


def with_openai(url: str, _: Path) -> list[Answer]:
    client = openai.OpenAI(base_url=url.removesuffix("/completions"), api_key="-", max_retries=0)
    answers = []
    for _ in range(POSTS):
        try:
            client.completions.create(model="tiny", prompt=PROMPT, max_tokens=1)
        except openai.APIStatusError as exc:
            answers.append((exc.status_code, exc.body["code"]))  # type: ignore[index]
    client.close()
    return answers


def with_curl(url: str, body_file: Path) -> list[Answer]:
    argv = ["curl", "-sS", "--max-time", "60", "-H", "Content-Type: application/json"]
    argv += ["--data-binary", f"@{body_file}", "-w", "\n%{http_code}", url]
    answers = []
    for _ in range(POSTS):
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        text, _, status = done.stdout.rpartition("\n")
        answers.append((int(status), json.loads(text)["error"]["code"]))
    return answers


CLIENTS: dict[str, Callable[[str, Path], list[Answer]]] = {
    "httpx": with_httpx,
    "requests": with_requests,
    "openai": with_openai,
    "curl": with_curl,
}


def start_probe(server) -> subprocess.Popen[str]:  # noqa: ANN001 - the ServerProcess fixture
    argv = [sys.executable, str(PROBE), "--port", str(server.port), "--pid", str(server.proc.pid)]
    probe = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert probe.stdout is not None and probe.stdout.readline().strip() == "ready"
    return probe


def stop_probe(probe: subprocess.Popen[str]) -> dict[str, list[float]]:
    output, _ = probe.communicate(timeout=60)
    return json.loads(output)


def test_every_client_reads_its_413_while_health_stays_fast(guarded_server, tmp_path) -> None:  # noqa: ANN001
    url = guarded_server.base_url + "/v1/completions"
    body_file = tmp_path / "body.json"
    body_file.write_bytes(BODY)
    probe = start_probe(guarded_server)
    seconds: dict[str, float] = {}
    try:
        for name, post in CLIENTS.items():
            started = time.monotonic()
            answers = post(url, body_file)
            seconds[name] = time.monotonic() - started
            assert answers == [(413, "request_too_large")] * POSTS, (name, answers)
    finally:
        figures = stop_probe(probe)
    latencies, rss = sorted(figures["latencies"]), figures["rss"]
    growth = (max(rss) - rss[0]) / 2**20
    print(
        f"\n{4 * POSTS} x 10 MB posts: "
        + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
        + f"; /health n={len(latencies)} median {latencies[len(latencies) // 2] * 1000:.1f} ms"
        f" max {latencies[-1] * 1000:.1f} ms; server RSS {rss[0] / 2**20:.0f} MiB,"
        f" peak growth {growth:.1f} MiB"
    )
    assert len(latencies) >= 20 and latencies[-1] < 0.1, latencies[-5:]
    assert growth < 64, f"the server's RSS grew by {growth:.0f} MiB"
    assert httpx.get(guarded_server.base_url + "/health").status_code == 200
