"""Checks shared by the SGLang and vLLM command builders."""

from __future__ import annotations

from collections.abc import Sequence

from ddtune.errors import UserError


def check_extra(extra: Sequence[str], owned_flags: Sequence[str]) -> None:
    """Refuse extra arguments that are one string or that set a flag ddtune owns."""
    if isinstance(extra, str):
        raise UserError("extra arguments must be a list of strings, not one string")
    for arg in extra:
        name = str(arg).split("=", 1)[0]
        if name in owned_flags:
            raise UserError(
                f"{name} is set by ddtune (from the trial's parameters or the service "
                "settings); remove it from the extra arguments"
            )
