"""Anthropic's tool-use system prompt: tokens the provider adds to a Claude request that carries
tools (docs.anthropic.com, "Tool use: pricing and tokens"). They take room in the window, are
billed as input and are in the provider's own ``count_tokens``, so a count of such a request
holds them as a fixed part of their own (``TOOL_PROMPT``), beside the tool definitions."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ..items import Rendering

__all__ = ["TOOL_PROMPT", "TOOL_PROMPT_TOKENS", "tool_prompt_tokens", "with_tool_prompt"]

TOOL_PROMPT = "tool-use system prompt"

# (model prefix, with tool_choice auto or none, with any or tool): the first prefix that matches.
TOOL_PROMPT_TOKENS: tuple[tuple[str, int, int], ...] = (
    ("claude-3-opus", 530, 281),
    ("claude-3-sonnet", 159, 235),
    ("claude-3-haiku", 264, 340),
    ("claude-3-5-haiku", 264, 340),
    ("claude", 346, 313),  # Claude 3.5 Sonnet, 3.7 Sonnet and every Claude 4 model
)


def tool_prompt_tokens(model: str, request: Mapping[str, Any]) -> int:
    """Tokens of the tool-use system prompt the provider adds to ``request`` for ``model`` (an id
    as clients send it, with or without a host's prefix: ``claude-sonnet-4-5``,
    ``anthropic/claude-3-haiku``, ``us.anthropic.claude-3-5-sonnet-...``); 0 without tools or for
    a model that is not Claude."""
    name = model.lower()
    start = name.find("claude")
    if not request.get("tools") or start < 0:
        return 0
    forced = _forces_a_tool(request.get("tool_choice"))
    for prefix, auto, forced_tokens in TOOL_PROMPT_TOKENS:
        if name.startswith(prefix, start):
            return forced_tokens if forced else auto
    return 0


def _forces_a_tool(choice: Any) -> bool:
    """A tool_choice that makes the model call a tool: Anthropic's ``any`` or ``tool``, or the
    OpenAI format's ``"required"`` or a named function (the same body sent through an
    OpenAI-compatible endpoint to Claude)."""
    if choice == "required":
        return True
    if not isinstance(choice, Mapping):
        return False
    if choice.get("type") == "allowed_tools":
        return choice.get("mode") == "required"
    return choice.get("type") in ("any", "tool", "function", "custom")


def with_tool_prompt(
    rendering: Rendering, request: Mapping[str, Any], model: str, safety_factor: float
) -> Rendering:
    """``rendering`` with the tool-use system prompt as a fixed part (:data:`TOOL_PROMPT`) when
    the provider adds one. Its figure is in the provider's tokens, and a count of Claude is the
    proxy encoding's times ``safety_factor``, rounded up: it is held as the fewest proxy tokens
    that scale back to at least the figure (346 is 266 proxy tokens, shown as 346; 313 is 241,
    shown as 314: 240 would show 312)."""
    tokens = tool_prompt_tokens(model, request)
    if not tokens:
        return rendering
    raw = math.floor((tokens - 1) / (safety_factor or 1.0) + 1e-9) + 1
    return dataclasses.replace(rendering, constants=(*rendering.constants, (TOOL_PROMPT, raw)))
