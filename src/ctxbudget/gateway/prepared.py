"""A fitted or assembled request ready to forward, with what is needed to record it afterwards."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalog.values import ModelSpec
from ..formats.tool_prompt import tool_prompt_tokens
from ..session.turns import ToolResult
from .bodies import conversation, header_value, last_user_text
from .refusals import with_settings
from .tools import sent_results

__all__ = [
    "WARNINGS_HEADER_CHARS",
    "Baseline",
    "Prepared",
    "build_prepared",
    "for_next_turn",
    "proxy_tokens",
    "warnings_header",
]

# The longest X-Ctxbudget-Warnings value (clients and proxies refuse headers past a few kB).
WARNINGS_HEADER_CHARS = 1000
# What every client reads back as it was written: printable ASCII (httpx sends and reads header
# values as ASCII; the server would write Latin-1)
_NOT_IN_HEADERS = re.compile(r"[^\x20-\x7e]")


def warnings_header(warnings: Sequence[object], told: Callable[[str], str] = with_settings) -> str:
    """A report's warnings as one header value, each as the client is told it (``told``: the
    gateway's options by their headers and serve flags), joined by `` | ``: runs of whitespace one
    space, any other character but printable ASCII ``?``, at most :data:`WARNINGS_HEADER_CHARS`."""
    text = " | ".join(" ".join(told(str(w)).split()) for w in warnings)
    if len(text) > WARNINGS_HEADER_CHARS:
        text = text[: WARNINGS_HEADER_CHARS - 3] + "..."
    return _NOT_IN_HEADERS.sub("?", text)


@dataclass(frozen=True)
class Baseline:
    """Policy mode: how many turns the session's store held when a turn was assembled (its pinned
    prefix compared with the last of them, if any) and whether the prefix may change (a new
    playbook version). A commit that finds more turns stored since compares the prefix with the
    last of them again: two turns sent at once were each checked against none of the other."""

    turns: int
    may_change: bool


@dataclass(frozen=True)
class Prepared:
    """A fitted request ready to forward, with what is needed to record it afterwards.

    ``report`` is built once, before this value (the stored turn's report); nothing changes it."""

    body: dict[str, Any]
    model: str
    session: str
    question: str
    report: Mapping[str, Any]
    estimate_usd: float | None
    proxy_tokens: int
    spec: ModelSpec | None
    calibrate: bool = True  # the billed input is what the estimate counts (see usage.covered_by_estimate)
    overhead_tokens: int = 0  # the tool-use system prompt the provider adds: counted, billed, not calibrated
    # Policy mode: what the session's next turn is compared with, kept once this turn is answered.
    next_turn: tuple[str, dict[str, Any]] | None = None
    # The tool results the client's last turn sends back (stored with the turn: .tools).
    tool_results: tuple[ToolResult, ...] = ()
    # Policy mode: what the pinned prefix was checked against (its commit checks again).
    baseline: Baseline | None = None
    # When it was prepared (the gateway's monotonic clock): the next turn's cache ages from it.
    prepared_at: float | None = None

    @property
    def proxy_before(self) -> int:
        """The request as sent by the client, in proxy-encoding tokens (the estimate without its
        safety factor), the tool-use system prompt aside (:func:`proxy_tokens`)."""
        return proxy_tokens(self.report, "tokens_before", self.overhead_tokens)

    def headers(self, told: Callable[[str], str] = with_settings) -> dict[str, str]:
        """What the client is told about its request (its warnings worded by ``told``)."""
        report = self.report
        out = {
            "x-ctxbudget-session": header_value(self.session),
            "x-ctxbudget-tokens-before": str(report["tokens_before"]),
            "x-ctxbudget-tokens-after": str(report["tokens_after"]),
            "x-ctxbudget-trimmed": "true"
            if report.get("trimmed", not report.get("passed_through"))
            else "false",
        }
        if self.estimate_usd is not None:
            out["x-ctxbudget-estimated-cost-usd"] = f"{self.estimate_usd:.6f}"
        warnings = report.get("warnings")
        if warnings:
            out["x-ctxbudget-warnings"] = warnings_header(warnings, told)
        cache = report.get("cache")
        if isinstance(cache, Mapping) and "read_tokens" in cache:  # fit mode's conversation caching
            out["x-ctxbudget-cache-read-predicted"] = str(cache["read_tokens"])
            out["x-ctxbudget-cache-write-predicted"] = str(cache["write_tokens"])
        return out


def build_prepared(
    body: Mapping[str, Any],
    out: dict[str, Any],
    session: str,
    report: Mapping[str, Any],
    estimate_usd: float | None,
    spec: ModelSpec | None,
    *,
    calibrate: bool,
    input_format: str,
    next_turn: tuple[str, dict[str, Any]] | None = None,
    baseline: Baseline | None = None,
    prepared_at: float | None = None,
) -> Prepared:
    """What is forwarded and recorded for a fitted or assembled body (``out``) of the client's
    ``body`` (in ``input_format``: the provider API's)."""
    model = str(body["model"])
    prompt = tool_prompt_tokens(spec.id if spec else model, body)  # counts hold it (formats.tool_prompt)
    proxy = 0 if report["exact"] else proxy_tokens(report, "tokens_after", prompt)
    return Prepared(
        out,
        model,
        session,
        last_user_text(body),
        report,
        estimate_usd,
        proxy,
        spec,
        calibrate=calibrate,
        overhead_tokens=prompt,
        next_turn=next_turn,
        tool_results=sent_results(input_format, conversation(body)),
        baseline=baseline,
        prepared_at=prepared_at,
    )


def proxy_tokens(report: Mapping[str, Any], field: str, prompt: int) -> int:
    """The report's ``field`` (``tokens_before`` or ``tokens_after``) in proxy-encoding tokens,
    less the ``prompt`` tokens the provider adds for tools (which a count holds, scaled back to
    them): the part the estimate's safety factor stands for, which the provider's count (less
    the same prompt) calibrates. Fit and policy mode alike (a policy's report has no parts)."""
    return max(0, round((float(report[field]) - prompt) / float(report["safety_factor"] or 1.0)))


def for_next_turn(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the next turn's assembly reads from this one: the breakpoints' prefix hashes and the
    pinned prefix (not the whole report: sessions held in memory stay small)."""
    return {
        "breakpoints": [{"prefix_sha256": b["prefix_sha256"]} for b in report.get("breakpoints", [])],
        # what the provider holds after the turn (an older stored report has its breakpoints only)
        **({"cache_entries": list(report["cache_entries"])} if "cache_entries" in report else {}),
        "pinned_prefix_sha256": report.get("pinned_prefix_sha256"),
        "pinned_prefix_text": report.get("pinned_prefix_text", ""),
        # the tool definitions INV-CTX-01 holds the next turn to (an older stored report: none)
        **({"tools_sha256": report["tools_sha256"]} if "tools_sha256" in report else {}),
    }
