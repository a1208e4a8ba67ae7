"""Reading the previous turn's report: an :class:`AssemblyReport`, its dict, or ``{"report": ...}``
as ``assemble --json`` writes it, checked to be an assembly's; the cached prefixes of it still
alive, from which this turn's cache reads are predicted; and what this turn leaves cached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..cache import TTL_SECONDS
from ..errors import InvalidRequestError
from ._report import AssemblyReport

__all__ = ["MAX_CACHE_ENTRIES", "entries_after", "live_entries", "read_previous"]


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


# At most this many cached prefixes are carried from turn to turn (the most recently used).
MAX_CACHE_ENTRIES = 32


def live_entries(
    previous: Mapping[str, Any] | None, idle_seconds: float | None
) -> dict[str, tuple[str, float]]:
    """The prefixes the previous turn left cached that are still alive after ``idle_seconds``
    (None: no time is known to have passed), each with its TTL and the seconds since its last use.

    A report carries ``cache_entries`` (what the provider holds after its call: an entry lives its
    TTL from its last use, and a call uses only the prefix it reads and those it writes); an older
    report has only its breakpoints, taken as used by its call."""
    given = (previous or {}).get("cache_entries")
    if given is None:
        points = _breakpoints(previous)
        # a TTL the provider does not have is read as the shorter one (it is not carried on)
        entries = [(b["prefix_sha256"], _known_ttl(b.get("ttl")), 0.0) for b in points]
    else:
        entries = _entries(given)
    idle = idle_seconds or 0.0
    return {digest: (ttl, age + idle) for digest, ttl, age in entries if age + idle <= TTL_SECONDS[ttl]}


def _known_ttl(ttl: object) -> str:
    """A breakpoint's TTL as the provider has it: ``1h``, else ``5m``."""
    return "1h" if ttl == "1h" else "5m"


def _breakpoints(previous: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    points = (previous or {}).get("breakpoints", [])
    if not isinstance(points, list) or not all(
        isinstance(b, Mapping) and isinstance(b.get("prefix_sha256"), str) for b in points
    ):
        raise InvalidRequestError(
            "previous.breakpoints must be a list of objects with a prefix_sha256 string (an assemble report's)",
            "$.breakpoints",
        )
    return points


def _entries(given: object) -> list[tuple[str, str, float]]:
    """The report's ``cache_entries``, checked."""
    out = []
    for n, entry in enumerate(given if isinstance(given, list) else [None]):
        age = entry.get("age_seconds") if isinstance(entry, Mapping) else None
        if (
            not isinstance(entry, Mapping)
            or not isinstance(entry.get("prefix_sha256"), str)
            or not isinstance(entry.get("ttl"), str)
            or entry["ttl"] not in TTL_SECONDS
            or isinstance(age, bool)
            or not isinstance(age, int | float)
            or not 0 <= age < float("inf")
        ):
            raise InvalidRequestError(
                "each cache entry is an object with a prefix_sha256 string, a ttl (5m or 1h) and an "
                "age_seconds >= 0 (an assemble report's)",
                f"$.cache_entries[{n}]" if isinstance(given, list) else "$.cache_entries",
            )
        out.append((entry["prefix_sha256"], str(entry["ttl"]), float(age)))
    return out


def entries_after(
    alive: Mapping[str, tuple[str, float]], read_sha256: str | None, written: Sequence[tuple[str, str]]
) -> list[tuple[str, str, float]]:
    """What the provider holds after this call: the entries alive before it, the one it reads and
    those it writes (``(prefix_sha256, ttl)``) used now; the :data:`MAX_CACHE_ENTRIES` most
    recently used, newest first."""
    entries = dict(alive)
    if read_sha256 is not None and read_sha256 in entries:
        entries[read_sha256] = (entries[read_sha256][0], 0.0)
    for digest, ttl in written:
        entries[digest] = (ttl, 0.0)
    ranked = sorted(entries.items(), key=lambda kv: (kv[1][1], kv[0]))[:MAX_CACHE_ENTRIES]
    return [(digest, ttl, age) for digest, (ttl, age) in ranked]
