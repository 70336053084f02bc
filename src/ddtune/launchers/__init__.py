"""`python -m ddtune.launchers <engine> ...`: print or exec a server's launch command.

The command builders live with the engines that have one (`ddtune.engines.sglang.sglang_argv`,
`ddtune.engines.vllm.vllm_argv`); `__main__` is the command-line front end over
them. A sweep spec or a systemd unit calls it with `{mode} {budget} {topk}
{window}` placeholders so that options SGLang cannot take as a placeholder (a
window of "none", no speculative flags for `ar`) are left out correctly. See
docs/readiness.md "Launchers" and docs/engines.md. Importing this never
loads torch.
"""
