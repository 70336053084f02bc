"""`ddtune train tokenizer|tasks|target|drafter|eval`: the recipe behind the bundled models.

    ddtune train tokenizer --out runs/tok
    ddtune train tasks --out src/ddtune/assets/tasks/heldout.jsonl
    ddtune train target --tokenizer runs/tok --out runs/target --checkpoint-dir runs/ckpt-target
    ddtune train drafter --target runs/target --out runs/drafter --checkpoint-dir runs/ckpt-drafter
    ddtune train eval --target runs/target [--drafter runs/drafter]

Heavy imports (torch) happen inside the handlers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ddtune.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train the tokenizer, target and drafter")
    sub = parser.add_subparsers(dest="train_command", metavar="WHAT", required=True)
    _add_tokenizer(sub)
    _add_tasks(sub)
    _add_target(sub)
    _add_drafter(sub)
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


def _add_target(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("target", help="train the Qwen3-architecture target LM")
    p.add_argument("--tokenizer", type=Path, required=True, help="folder with tokenizer.json")
    p.add_argument("--out", type=Path, required=True, help="output Hugging Face folder")
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--init-from", default=None, help="trained target folder to continue (stage 2)")
    for name, kind, default in [
        ("seed", int, 0),
        ("hidden-size", int, 256),
        ("num-layers", int, 6),
        ("num-heads", int, 4),
        ("num-kv-heads", int, 2),
        ("intermediate-size", int, 768),
        ("max-context", int, 512),
        ("seq-len", int, 512),
        ("batch-size", int, 8),
        ("steps", int, 1000),
        ("lr", float, 2e-3),
        ("warmup", int, 50),
        ("weight-decay", float, 0.1),
        ("task-share", float, 0.7),
        ("checkpoint-every", int, 50),
        ("threads", int, 2),
    ]:
        p.add_argument(f"--{name}", type=kind, default=default)
    p.set_defaults(func=_run_target)


def _run_target(args: argparse.Namespace) -> int:
    from ddtune.train.target import TargetTrainConfig, train_target

    keys = [
        f
        for f in TargetTrainConfig.__dataclass_fields__
        if f not in ("tokenizer_dir", "out_dir", "checkpoint_dir")
    ]
    cfg = TargetTrainConfig(
        tokenizer_dir=str(args.tokenizer),
        out_dir=str(args.out),
        checkpoint_dir=str(args.checkpoint_dir),
        **{k: getattr(args, k) for k in keys},
    )
    summary = train_target(cfg, resume=args.resume)
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}))
    return 0


def _add_drafter(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drafter", help="train a DFlash drafter on the target's own outputs")
    p.add_argument("--target", type=Path, required=True, help="trained target folder")
    p.add_argument("--out", type=Path, required=True, help="output drafter folder")
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument(
        "--stop-at-eos",
        action="store_true",
        help="distill only up to the target's EOS (default: continue past it)",
    )
    for name, kind, default in [
        ("seed", int, 0),
        ("num-layers", int, 2),
        ("block-size", int, 8),
        ("intermediate-size", int, 768),
        ("gamma", float, 4.0),
        ("prompts", int, 2048),
        ("gen-tokens", int, 96),
        ("anchors", int, 16),
        ("batch-size", int, 16),
        ("steps", int, 1200),
        ("lr", float, 1e-3),
        ("warmup", int, 50),
        ("checkpoint-every", int, 100),
        ("threads", int, 2),
    ]:
        p.add_argument(f"--{name}", type=kind, default=default)
    p.set_defaults(func=_run_drafter)


def _run_drafter(args: argparse.Namespace) -> int:
    from ddtune.train.drafter import DrafterTrainConfig, train_drafter

    keys = [
        f
        for f in DrafterTrainConfig.__dataclass_fields__
        if f not in ("target_dir", "out_dir", "checkpoint_dir")
    ]
    cfg = DrafterTrainConfig(
        target_dir=str(args.target),
        out_dir=str(args.out),
        checkpoint_dir=str(args.checkpoint_dir),
        **{k: getattr(args, k) for k in keys},
    )
    summary = train_drafter(cfg, resume=args.resume)
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}))
    return 0


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure pass@1, perplexity and acceptance lengths")
    p.add_argument("--target", type=Path, required=True)
    p.add_argument("--drafter", type=Path, default=None)
    p.add_argument("--tasks", type=Path, default=None, help="HumanEval JSONL (default: bundled)")
    p.add_argument("--budgets", default="8,16,32,64")
    p.add_argument("--prompts", type=int, default=12, help="held-out prompts for acceptance")
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--acceptance-only", action="store_true", help="skip pass@1 and perplexity")
    p.set_defaults(func=_run_eval)


def _run_eval(args: argparse.Namespace) -> int:
    from ddtune.train.evaluate import evaluate_models

    try:
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        raise UserError(
            f"--budgets must be comma-separated integers; got {args.budgets!r}"
        ) from None
    if args.acceptance_only and args.drafter is None:
        raise UserError("--acceptance-only needs --drafter")
    figures = evaluate_models(
        args.target,
        args.drafter,
        args.tasks,
        budgets,
        args.prompts,
        args.max_tokens,
        target_figures=not args.acceptance_only,
    )
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0
