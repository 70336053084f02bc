"""`python -m ddtune.launchers sglang|vllm ...`: print or exec one engine command line.

A sweep spec's `command` (or a systemd `ExecStart=`) can only substitute
placeholders into fixed arguments; it cannot leave out the window flag when
the window is "none", or every speculative flag when the mode is `ar`. This
front end takes the trial's values as plain options, builds the argv with the
engine's `launch_command` (one subcommand per engine that has a launcher;
the parser is `ddtune.engines.launch.launcher_parser`) and replaces itself with
the engine (`os.execvpe`: same PID, so the controller's process and identity
checks see the engine itself). Where a flag's name depends on the engine's
release (SGLang's draft-window flag), the engine's own parser is asked first
(a few seconds) unless `--window-flag` names it. `--print` shows the command
instead:

    python -m ddtune.launchers sglang --model-path M --draft-model-path D \\
        --mode ddtree --budget 8 --topk 4 --window none --port 30000 --tp 8 \\
        --python /opt/sglang/bin/python -- --mem-fraction-static 0.8
"""

from __future__ import annotations

import os
import sys

from ddtune.engines.launch import build, command_line, launcher_parser
from ddtune.errors import UserError


def main(argv: list[str] | None = None) -> int:
    args = launcher_parser().parse_args(argv)
    try:
        command, env = build(args)
    except UserError as exc:
        print(f"ddtune.launchers: error: {exc}", file=sys.stderr)
        return 2
    if args.print:
        print(command_line(env, command))
        return 0
    sys.stdout.flush()
    os.execvpe(command[0], command, {**os.environ, **env})
    return 127  # not reached: execvpe replaced this process


if __name__ == "__main__":
    sys.exit(main())
