"""CLI: `ddtune generate` (one request with the engine); the model flags shared with `bench-engine`.

Defaults to the bundled models. Flags become `DecodeParams`/`SamplingParams`
through their `from_wire`, so a bad value is a one-line `UserError`. The
benchmark command lives in `cli/bench_engine.py`. See
docs/ddtree.md "Engine".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddtune.errors import UserError
from ddtune.params import MODES, WINDOW_NONE, DecodeParams, SamplingParams, parse_window


def register(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate text with the engine (ar, dflash, ddtree)")
    model_args(gen)
    gen.add_argument("--mode", choices=MODES, default="ddtree")
    gen.add_argument("--budget", type=int, default=16, help="tree node budget (ddtree)")
    gen.add_argument("--topk", type=int, default=4, help="per-depth branching cap (ddtree)")
    gen.add_argument("--window", default=WINDOW_NONE, help="drafter context window W or 'none'")
    gen.add_argument("--max-tokens", type=int, default=64)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    gen.add_argument("--ignore-eos", action="store_true")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--prompt-file", type=Path, help="file holding the prompt text")
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    gen.set_defaults(func=cmd_generate)


def model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", type=Path, help="target model folder (default: bundled)")
    parser.add_argument("--drafter", type=Path, help="DFlash drafter folder (default: bundled)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")


def setup_threads(threads: int | None) -> None:
    import torch

    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads must be at least 1; got {threads}")
        torch.set_num_threads(threads)


def model_dirs(args: argparse.Namespace, need_drafter: bool) -> tuple[Path, Path | None]:
    from ddtune import assets

    target = args.target or assets.default_target_dir()
    drafter = args.drafter
    if drafter is None and need_drafter:
        drafter = assets.default_drafter_dir()
    return target, drafter


def generate_params(args: argparse.Namespace) -> tuple[DecodeParams, SamplingParams]:
    """The `ddtune generate` flags as parameters; `UserError` names a bad one."""
    params = DecodeParams.from_wire(
        {
            "mode": args.mode,
            "budget": args.budget,
            "topk": args.topk,
            "window": parse_window(args.window),
        }
    )
    sampling = SamplingParams.from_wire(
        {
            "max_new_tokens": args.max_tokens,
            "temperature": args.temperature,
            "top_p": args.top_p,
            "seed": args.seed,
            "stop_strings": args.stop,
            "ignore_eos": args.ignore_eos,
        }
    )
    return params, sampling


def cmd_generate(args: argparse.Namespace) -> int:
    from ddtune.ddtree.engine import Engine

    setup_threads(args.threads)
    params, sampling = generate_params(args)
    text = args.prompt if args.prompt is not None else _read(args.prompt_file)
    target, drafter = model_dirs(args, need_drafter=params.mode != "ar")
    engine = Engine.load(target, drafter)
    result = engine.generate(engine.tokenizer.encode(text), params, sampling)
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    print(result.text)
    s = result.stats
    print(
        f"[{len(result.token_ids)} tokens, {result.finish_reason}, {s.rounds} rounds, "
        f"tau {s.mean_acceptance_length:.2f}, {s.tokens_per_second:.1f} tok/s]",
        file=sys.stderr,
    )
    return 0


def _read(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"prompt file {path} does not exist")
    return path.read_text()
