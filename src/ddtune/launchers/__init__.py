"""Command lines for external engines (SGLang, vLLM) built from ddtune's parameters.

    sglang_argv(model, drafter, params, port, extra) -> (argv, env)   # DDTREE / DFLASH flags
    vllm_argv(model, speculative_config(...), port, extra) -> (argv, env)

`python -m ddtune.launchers sglang|vllm ...` prints or executes such a command
(see `ddtune.launchers.__main__`); a sweep spec or a systemd unit can call it
with `{mode} {budget} {topk} {window}` placeholders so that options SGLang
cannot take as a placeholder (a window of "none", no speculative flags for
`ar`) are left out correctly. Stdlib only: importing this never loads torch.
"""

from ddtune.launchers.sglang import expected_server_args, sglang_argv
from ddtune.launchers.vllm import speculative_config, vllm_argv

__all__ = ["expected_server_args", "sglang_argv", "speculative_config", "vllm_argv"]
