"""Reading the previous turn's report: an :class:`AssemblyReport`, its dict, or ``{"report": ...}``
as ``assemble --json`` writes it, checked to be an assembly's; and the cached prefixes of it still
alive, from which this turn's cache reads are predicted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cache import TTL_SECONDS
from ..errors import InvalidRequestError
from ._report import AssemblyReport

__all__ = ["live_hashes", "read_previous"]


def _as_mapping(value: object) -> object:
    """A report as its dict; anything else as it is."""
    return value.to_dict() if isinstance(value, AssemblyReport) else value


def read_previous(previous: Mapping[str, Any] | AssemblyReport | None) -> Mapping[str, Any] | None:
    """The previous turn's report as a dict (None without one); :class:`InvalidRequestError` when
    it is not an object or not the report of an assembly."""
    outer = _as_mapping(previous)
    if outer is None:
        return None
    if not isinstance(outer, Mapping):
        raise InvalidRequestError("previous must be the previous turn's report (a JSON object)", "")
    report = _as_mapping(outer.get("report", outer))
    if not isinstance(report, Mapping):
        raise InvalidRequestError("the previous turn's report is not an object", "$.report")
    if not {"breakpoints", "pinned_prefix_sha256"} & set(report):
        raise InvalidRequestError(
            "previous is not the report of an assembly (it has neither breakpoints nor "
            "pinned_prefix_sha256): pass the previous turn's `assemble --json` output",
            "$",
        )
    return report


def live_hashes(previous: Mapping[str, Any] | None, idle_seconds: float | None) -> frozenset[str]:
    """The previous turn's cached prefixes still alive after ``idle_seconds`` (None: all): an
    entry lives its TTL from its last use, and the previous turn used every one of its breakpoints."""
    points = (previous or {}).get("breakpoints", [])
    if not isinstance(points, list) or not all(
        isinstance(b, Mapping) and isinstance(b.get("prefix_sha256"), str) for b in points
    ):
        raise InvalidRequestError(
            "previous.breakpoints must be a list of objects with a prefix_sha256 string (an assemble report's)",
            "$.breakpoints",
        )
    return frozenset(
        b["prefix_sha256"]
        for b in points
        if idle_seconds is None or idle_seconds <= TTL_SECONDS.get(str(b.get("ttl", "5m")), 300.0)
    )
