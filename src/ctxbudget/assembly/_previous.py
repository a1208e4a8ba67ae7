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
    if not isinstance(report.get("pinned_prefix_sha256"), str):  # INV-CTX-01 was skipped without it
        raise InvalidRequestError(
            "the previous report has no pinned_prefix_sha256 string (edited or damaged), so this "
            "turn's pinned prefix cannot be held to it (INV-CTX-01); pass the report the previous "
            "turn printed",
            "$.pinned_prefix_sha256",
        )
    for key in ("pinned_prefix_text", "tools_sha256"):  # optional; a number was read as a changed prefix
        if report.get(key) is not None and not isinstance(report[key], str):
            raise InvalidRequestError(
                f"the previous report's {key} is not a string (edited or damaged); pass the report "
                "the previous turn printed",
                f"$.{key}",
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
    alive: Mapping[str, tuple[str, float]],
    read_sha256: str | None,
    written: Sequence[tuple[str, str]],
    marked: Sequence[str] = (),
) -> list[tuple[str, str, float]]:
    """What the provider holds after this call, at most :data:`MAX_CACHE_ENTRIES`: the prefix it
    reads and those it writes (``(prefix_sha256, ttl)``), used now; then the call's other marked
    prefixes still alive (``marked``: passed over, so as old as their last use, but what the next
    turn can read); then the rest of ``alive`` (newest first), the most recently used first.

    The cap is this record's, not the provider's: ranked by age alone (every age is 0 when no idle
    time is given) the kept 32 were those whose hashes sorted first, and from turn 30 of a session
    a turn's own prefixes were dropped; ranked by use alone the pinned playbook, read inside a
    longer prefix every turn, aged out of the 32, and a turn whose longer prefix changed predicted
    the playbook a miss (a 1-hour write, five times the turn's cost: refused over a ceiling)."""
    used: dict[str, tuple[str, float]] = {}
    if read_sha256 is not None and read_sha256 in alive:
        used[read_sha256] = (alive[read_sha256][0], 0.0)
    for digest, ttl in written:
        used[digest] = (ttl, 0.0)
    carried = {d: alive[d] for d in marked if d in alive and d not in used}
    rest = sorted(
        ((d, v) for d, v in alive.items() if d not in used and d not in carried), key=lambda kv: kv[1][1]
    )
    ranked = [*used.items(), *carried.items(), *rest][:MAX_CACHE_ENTRIES]  # the sort is stable: ties in order
    return [(digest, ttl, age) for digest, (ttl, age) in ranked]
