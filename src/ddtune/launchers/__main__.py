"""`python -m ddtune.launchers sglang|vllm ...`: print or exec one engine command line.

A sweep spec's `command` (or a systemd `ExecStart=`) can only substitute
placeholders into fixed arguments; it cannot leave out
`--speculative-dflash-draft-window-size` when the window is "none", or every
speculative flag when the mode is `ar`. This front end takes the trial's values
as plain options, builds the argv with `sglang_argv`/`vllm_argv` and replaces
itself with the engine (`os.execvpe`: same PID, so the controller's process and
identity checks see the engine itself). `--print` shows the command instead:

    python -m ddtune.launchers sglang --model-path M --draft-model-path D \\
        --mode ddtree --budget 8 --topk 4 --window none --port 30000 --tp 8 \\
        --python /opt/sglang/bin/python -- --mem-fraction-static 0.8
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from ddtune.errors import UserError
from ddtune.launchers.sglang import sglang_argv
from ddtune.launchers.vllm import speculative_config, vllm_argv
from ddtune.params import DecodeParams


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ddtune.launchers", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="engine", required=True)
    sg = sub.add_parser("sglang", help="python -m sglang.launch_server with DDTREE/DFLASH flags")
    sg.add_argument("--model-path", required=True)
    sg.add_argument("--draft-model-path", default=None)
    sg.add_argument("--mode", default="ddtree", choices=("ar", "dflash", "ddtree"))
    sg.add_argument("--budget", type=int, default=16)
    sg.add_argument("--topk", type=int, default=4)
    sg.add_argument("--window", default="none", help="draft window in tokens, or 'none'")
    sg.add_argument("--tp", type=int, default=1)
    _common(sg, default_port=30000)
    vl = sub.add_parser(
        "vllm", help="python -m vllm.entrypoints.openai.api_server with --speculative-config"
    )
    vl.add_argument("--model", required=True)
    vl.add_argument("--method", default=None, help="ngram, dflash, ... (omit for plain decoding)")
    vl.add_argument("--num-speculative-tokens", type=int, default=None)
    vl.add_argument("--draft-model-path", default=None)
    vl.add_argument("--prompt-lookup-max", type=int, default=None)
    vl.add_argument("--prompt-lookup-min", type=int, default=None)
    vl.add_argument("--served-model-name", default=None)
    vl.add_argument("--cpu-kvcache-gib", type=int, default=None, help="sets VLLM_CPU_KVCACHE_SPACE")
    _common(vl, default_port=8000)
    return parser


def _common(parser: argparse.ArgumentParser, default_port: int) -> None:
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--python", default=sys.executable, help="the engine's Python interpreter")
    parser.add_argument(
        "--print", action="store_true", help="print the command instead of running it"
    )
    parser.add_argument("extra", nargs="*", help="after --: passed to the engine unchanged")


def build(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The engine argv and environment additions for parsed options."""
    if args.engine == "sglang":
        params = DecodeParams.from_dict(
            {"mode": args.mode, "budget": args.budget, "topk": args.topk, "window": args.window}
        )
        return sglang_argv(
            args.model_path,
            args.draft_model_path,
            params,
            args.port,
            args.extra,
            python=args.python,
            host=args.host,
            tp=args.tp,
        )
    spec = None
    if args.method:
        if args.num_speculative_tokens is None:
            raise UserError("--method needs --num-speculative-tokens")
        spec = speculative_config(
            args.method,
            args.num_speculative_tokens,
            draft_path=args.draft_model_path,
            prompt_lookup_max=args.prompt_lookup_max,
            prompt_lookup_min=args.prompt_lookup_min,
        )
    return vllm_argv(
        args.model,
        spec,
        args.port,
        args.extra,
        python=args.python,
        host=args.host,
        served_model_name=args.served_model_name,
        cpu_kvcache_gib=args.cpu_kvcache_gib,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        command, env = build(args)
    except UserError as exc:
        print(f"ddtune.launchers: error: {exc}", file=sys.stderr)
        return 2
    if args.print:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        print((prefix + " " if prefix else "") + shlex.join(command))
        return 0
    sys.stdout.flush()
    os.execvpe(command[0], command, {**os.environ, **env})
    return 127  # not reached: execvpe replaced this process


if __name__ == "__main__":
    sys.exit(main())
