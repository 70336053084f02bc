"""How much does this machine's CPU speed move, and what would request interleaving cancel?

    python benchmarks/cpu_jitter.py [--seconds 120] [--request 0.7] [--per-config 4,8]

One thread runs a 256x256 float32 matmul loop for `--seconds`, counting
products per 50 ms chunk: the log rate of each chunk is the machine's speed at
that moment (nothing else of ddtune runs). It prints

    1. the spread (log-sd) of the rate over windows of 0.05-8 s, and how much two
       adjacent windows differ: the noise one trial of that length carries;
    2. for two "configs" measured over `--per-config` seconds each, the spread of
       their log-rate difference when measured back to back (one trial after the
       other, as a sweep pass does today) and when alternated request by request
       (`--request` seconds each) over the same span.

The configs are the same computation, so every difference is the machine's
noise. See docs/benchmarks.md "The demo".
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

CHUNK_S = 0.05


def probe(seconds: float) -> list[float]:
    """Log matmul rate per 50 ms chunk over `seconds`."""
    torch.set_num_threads(1)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < CHUNK_S:
            torch.mm(a, b)
            n += 1
        rates.append(math.log(n / (time.perf_counter() - t0)))
    return rates


def windows(lr: list[float], size: int) -> tuple[float, float]:
    """(log-sd over windows of `size` chunks, log-sd of adjacent windows' difference)."""
    means = [statistics.fmean(lr[i : i + size]) for i in range(0, len(lr) - size + 1, size)]
    diffs = [b - a for a, b in zip(means, means[1:], strict=False)]
    return statistics.stdev(means), statistics.stdev(diffs)


def paired(lr: list[float], request: int, per_config: int) -> tuple[float, float, int]:
    """Spread of A-B over spans of 2 x `per_config` chunks: (back to back, alternated, n)."""
    back, alternated = [], []
    for start in range(0, len(lr) - 2 * per_config + 1, 2 * per_config):
        span = lr[start : start + 2 * per_config]
        back.append(statistics.fmean(span[:per_config]) - statistics.fmean(span[per_config:]))
        requests = [span[i : i + request] for i in range(0, len(span), request)]
        a = [x for r in requests[0::2] for x in r]
        b = [x for r in requests[1::2] for x in r]
        alternated.append(statistics.fmean(a) - statistics.fmean(b))
    return statistics.stdev(back), statistics.stdev(alternated), len(back)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--request", type=float, default=0.7, help="seconds per request")
    parser.add_argument("--per-config", default="4,8", help="seconds per config, comma-separated")
    args = parser.parse_args()
    lr = probe(args.seconds)
    print(f"{len(lr)} chunks of {CHUNK_S * 1000:.0f} ms over {args.seconds:.0f} s")
    for seconds in (0.05, 0.2, 0.5, 1, 2, 4, 8):
        sd, diff = windows(lr, max(1, round(seconds / CHUNK_S)))
        print(f"  window {seconds:5.2f} s: log-sd {sd:.3f}, adjacent windows differ by {diff:.3f}")
    request = max(1, round(args.request / CHUNK_S))
    for per in (float(x) for x in args.per_config.split(",")):
        back, alt, n = paired(lr, request, round(per / CHUNK_S))
        print(
            f"  {per:g} s per config: A-B back to back {back:.3f}, "
            f"alternating {args.request:g} s requests {alt:.3f} (n={n})"
        )


if __name__ == "__main__":
    main()
