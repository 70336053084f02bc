"""`ddtune train tokenizer|tasks|target|drafter|eagle3|eval`: the recipe behind the bundled models.

    ddtune train tokenizer --out runs/tok
    ddtune train tasks --out src/ddtune/assets/tasks/heldout.jsonl
    ddtune train target --tokenizer runs/tok --out runs/target --checkpoint-dir runs/ckpt-target
    ddtune train drafter --target runs/target --out runs/drafter --checkpoint-dir runs/ckpt-drafter
    ddtune train eagle3 --target runs/target --out runs/eagle3 --checkpoint-dir runs/ckpt-eagle3
    ddtune train eval --target runs/target [--drafter runs/drafter] [--eagle3 runs/eagle3]

The `target`, `drafter` and `eagle3` flags are the fields of `TargetTrainConfig`,
`DrafterTrainConfig` and `Eagle3TrainConfig` (`ddtune.train.configs`), so every
default is written once. Heavy
imports (torch) happen inside the handlers. See docs/ddtree.md "Train".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddtune.cli import add_group
from ddtune.cli.bench_engine import parse_budgets
from ddtune.errors import UserError
from ddtune.train.configs import (
    DrafterTrainConfig,
    Eagle3TrainConfig,
    RunSettings,
    TargetTrainConfig,
    add_arguments,
    from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    text = "train the tokenizer, target, DFlash drafter and EAGLE-3 head"
    sub = add_group(subparsers, "train", text, metavar="WHAT")
    _add_tokenizer(sub)
    _add_tasks(sub)
    _add_training(
        sub, "target", "train the Qwen3-architecture target LM", TargetTrainConfig, _run_target
    )
    _add_training(
        sub,
        "drafter",
        "train a DFlash drafter on the target's own outputs",
        DrafterTrainConfig,
        _run_drafter,
    )
    _add_training(
        sub,
        "eagle3",
        "train an EAGLE-3 head (vLLM/SGLang layout) on the target's own outputs",
        Eagle3TrainConfig,
        _run_eagle3,
    )
    _add_eval(sub)


def _add_tokenizer(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenizer", help="byte-level BPE on the mixed corpus")
    p.add_argument("--out", type=Path, required=True, help="folder for tokenizer.json")
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--documents", type=int, default=12000, help="corpus documents to learn from")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_tokenizer)


def _run_tokenizer(args: argparse.Namespace) -> int:
    from ddtune.train.corpus import sample_documents
    from ddtune.train.tokenizer import save_tokenizer, train_tokenizer

    if args.documents < 1:
        raise UserError(f"--documents must be at least 1; got {args.documents}")
    tokenizer = train_tokenizer(sample_documents(args.seed, args.documents), args.vocab_size)
    save_tokenizer(tokenizer, args.out)
    print(f"wrote {args.out / 'tokenizer.json'} ({tokenizer.get_vocab_size()} tokens)")
    return 0


def _add_tasks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="write held-out coding tasks (HumanEval JSONL)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--seed", type=int, default=1234)
    p.set_defaults(func=_run_tasks)


def _run_tasks(args: argparse.Namespace) -> int:
    from ddtune.train.tasks import heldout_tasks, write_jsonl

    if not 1 <= args.count <= 10000:
        raise UserError(f"--count must be between 1 and 10000; got {args.count}")
    write_jsonl(heldout_tasks(args.count, args.seed), args.out)
    print(f"wrote {args.count} held-out tasks to {args.out}")
    return 0


def _add_training(
    sub: argparse._SubParsersAction,
    name: str,
    text: str,
    cls: type[RunSettings],
    run: Callable[[argparse.Namespace], int],
) -> None:
    """`ddtune train NAME`: one flag per field of `cls` (see configs.py), plus `--resume`."""
    p = sub.add_parser(name, help=text)
    add_arguments(p, cls)
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.set_defaults(func=run)


def _run_target(args: argparse.Namespace) -> int:
    from ddtune.train.target import train_target

    return _print_summary(train_target(from_args(TargetTrainConfig, args), resume=args.resume))


def _run_drafter(args: argparse.Namespace) -> int:
    from ddtune.train.drafter import train_drafter

    return _print_summary(train_drafter(from_args(DrafterTrainConfig, args), resume=args.resume))


def _run_eagle3(args: argparse.Namespace) -> int:
    from ddtune.train.eagle3 import train_eagle3

    return _print_summary(train_eagle3(from_args(Eagle3TrainConfig, args), resume=args.resume))


def _print_summary(summary: dict[str, Any]) -> int:
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}))
    return 0


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure pass@1, perplexity and acceptance lengths")
    p.add_argument("--target", type=Path, required=True)
    p.add_argument("--drafter", type=Path, default=None)
    p.add_argument(
        "--eagle3",
        type=Path,
        default=None,
        help="an EAGLE-3 head: its acceptance length (tokens committed per verify round, the bonus token included) at K = 1..5 draft tokens",
    )
    p.add_argument("--tasks", type=Path, default=None, help="HumanEval JSONL (default: bundled)")
    p.add_argument("--budgets", default="8,16,32,64")
    p.add_argument("--prompts", type=int, default=12, help="held-out prompts for acceptance")
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--acceptance-only", action="store_true", help="skip pass@1 and perplexity")
    p.set_defaults(func=_run_eval)


def _run_eval(args: argparse.Namespace) -> int:
    from ddtune.train.evaluate import evaluate_models

    budgets = parse_budgets(args.budgets)
    if args.acceptance_only and args.drafter is None and args.eagle3 is None:
        raise UserError("--acceptance-only needs --drafter or --eagle3")
    figures = evaluate_models(
        args.target,
        args.drafter,
        args.tasks,
        budgets,
        args.prompts,
        args.max_tokens,
        target_figures=not args.acceptance_only,
        eagle3_dir=args.eagle3,
    )
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0
