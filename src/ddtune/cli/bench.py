"""`ddtune bench --url URL [--engine ENGINE] [--matrix FILE.toml] [--out FILE.json]`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ddtune.engines import ENGINES

if TYPE_CHECKING:
    from ddtune.bench.result import BenchResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark a running server: throughput, acceptance length, coding tests",
        description="Run the benchmark matrix against a running server and write one JSON document.",
    )
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="ddtune",
        help="the server's engine: how to request and read acceptance length (default: ddtune)",
    )
    parser.add_argument(  # its name before 0.2; still read, left out of --help
        "--server-kind",
        dest="engine",
        choices=ENGINES,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--matrix", help="TOML file with a [bench] table (default: built-in matrix)"
    )
    parser.add_argument("--out", help="write the result JSON here (default: print a summary only)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddtune.bench import BenchError, BenchMatrix, run_bench

    matrix = BenchMatrix.from_toml(args.matrix) if args.matrix else BenchMatrix()
    try:
        result = run_bench(args.url, matrix, engine=args.engine, progress=not args.no_progress)
    except BenchError as exc:
        print(f"ddtune: bench failed: {exc}", file=sys.stderr)
        return 1
    if args.out:
        result.save(args.out)
    print(json.dumps(_summary(result), indent=1))
    return 0


def _summary(result: BenchResult) -> dict[str, Any]:
    rounded = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.aggregates.items()}
    return {
        "url": result.base_url,
        "engine": result.engine,
        "model": result.model,
        "prompt_set_hash": result.prompt_set_hash,
        "hardware": result.hardware_fingerprint,
        "aggregates": rounded,
        "acceptance_source": result.acceptance_source,
        "notes": result.notes,
        "duration_s": round(result.duration_s, 2),
    }
