"""Measuring a rendering: one encode per chunk gives the total, each owner's share, and spans."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .formats.base import ItemKey, Owner, Rendering
from .tokens.counter import analyze
from .tokens.encoding import Encoding
from .trim.text import TextSpan

__all__ = ["Measurement", "measure", "measure_total"]


@dataclass(frozen=True)
class Measurement:
    """Raw tokens in total and per owner (an item key or a fixed part's name)."""

    total: int
    by_owner: dict[Owner, int]
    spans: dict[ItemKey, TextSpan]

    def fixed_parts(self) -> dict[str, int]:
        """Tokens of the parts that are counted but never trimmed."""
        return {o: n for o, n in self.by_owner.items() if isinstance(o, str) and n}


def measure(rendering: Rendering, encoding: Encoding) -> Measurement:
    """Encode each chunk once (content-cached) and attribute every token to the segment it starts in."""
    by_owner: defaultdict[Owner, int] = defaultdict(int)
    spans: dict[ItemKey, TextSpan] = {}
    for chunk in rendering.chunks:
        text = chunk[0].text if len(chunk) == 1 else "".join(segment.text for segment in chunk)
        if not text:
            continue
        analysis = analyze(encoding, text)
        if len(chunk) == 1:
            by_owner[chunk[0].owner] += analysis.tokens
            if chunk[0].content and not isinstance(chunk[0].owner, str):
                spans[chunk[0].owner] = TextSpan(analysis, 0, len(analysis.data))
            continue
        position = 0
        before = 0  # tokens starting before ``position``; each boundary is looked up once
        ascii_only = len(analysis.data) == len(text)  # then characters are bytes
        for segment in chunk:
            end = position + (len(segment.text) if ascii_only else len(segment.text.encode("utf-8")))
            upto = analysis.tokens_starting_before(end)
            by_owner[segment.owner] += upto - before
            if segment.content and not isinstance(segment.owner, str):
                spans[segment.owner] = TextSpan(analysis, position, end)
            position, before = end, upto
    for owner, tokens in rendering.constants:
        by_owner[owner] += tokens
    return Measurement(sum(by_owner.values()), dict(by_owner), spans)


def measure_total(rendering: Rendering, encoding: Encoding) -> int:
    """Just the total: one (content-cached) encode per chunk, no attribution to owners."""
    chunks = (c[0].text if len(c) == 1 else "".join(s.text for s in c) for c in rendering.chunks)
    return sum(analyze(encoding, text).tokens for text in chunks if text) + sum(
        n for _, n in rendering.constants
    )
