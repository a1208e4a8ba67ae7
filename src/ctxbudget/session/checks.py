"""What a session checks when it is created, so that a turn never fails for it later: its
policy has a rolling tier for the turns' history, and its base holds standing items only."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..assembly import Policy, Tier
from ..errors import ConfigError, InvalidRequestError

__all__ = ["check_base_items", "rolling_tier"]


def rolling_tier(policy: Policy) -> Tier:
    """The policy's rolling tier, where a session's past turns go (ConfigError: it has none)."""
    found = policy.first_tier("rolling")
    if found is None:
        raise ConfigError(f"policy {policy.name!r} has no rolling tier for the session's history")
    return found


# The ids a session gives its turns' items (and the ledger's header), and the kinds each turn brings.
_TURN_IDS = re.compile(r"question|(?:call|result)-\d+|turn-\d+-\d+|ledger|ledger-turn-\d+")
_TURN_KINDS = frozenset({"question", "tool_call", "tool_result"})


def check_base_items(items: Sequence[Any]) -> None:
    """A base holds standing items: none with an id the session gives its turns' items, no
    question or tool call of its own (each turn brings those), and no ledger item (the session
    keeps its own): found now, not at every turn."""
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        if isinstance(item.get("id"), str) and _TURN_IDS.fullmatch(item["id"]):
            raise InvalidRequestError(
                f"item id {item['id']!r} is one the session gives its turns' items: rename it",
                f"$.items[{n}].id",
            )
        if item.get("kind") in _TURN_KINDS:
            raise InvalidRequestError(
                f"a base holds standing items, not a {item['kind']}: each turn brings its question and tool calls",
                f"$.items[{n}].kind",
            )
        if item.get("kind") == "ledger":
            # Block 3 is the session's own ledger, folded under the policy's ceiling without it:
            # once the session's entries joined it, every turn was over that ceiling (exit 3)
            raise InvalidRequestError(
                "a base holds standing items, not a ledger: the session keeps its own ledger (Block 3) "
                "under the policy's ledger_ceiling_tokens; give standing notes another kind (document)",
                f"$.items[{n}].kind",
            )
