"""Measuring a rendering as a fit's decisions ask: exact counts where they matter, bounds elsewhere.

A fit into a window much smaller than its input needs exact counts only of what it may keep; a
text its lower bound already shows cannot fit is never tokenized. :class:`LazyMeasurement` answers
both questions: :meth:`~LazyMeasurement.cost` (exact, counted on first use) and
:meth:`~LazyMeasurement.at_least` (:func:`ctxbudget.tokens.bounds.tokens_at_least`, or the exact
count once it is known).

The counts are those of :func:`ctxbudget.measure.measure` (property-tested). A chunk shorter than
:data:`LAZY_MIN_CHARS` is encoded whole when one of its owners is first asked for. A longer one,
under an encoding with proven hard boundaries, is encoded window by window: a segment's tokens are
those of the window from the last hard boundary at or before its start to the first at or after
its end, which encodes to the same tokens as the whole chunk does there (``tokens.encoding``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from .items import ItemKey, Owner, Rendering, Segment
from .measure import MIN_REUSE_CHARS, Sources, chunk_text, segment_shares, spans_of
from .tokens.bounds import SHORT_TEXT, at_least_ceiling, tokens_at_least
from .tokens.counter import ChunkAnalysis, analyze
from .tokens.encoding import Encoding, first_boundary, last_boundary
from .trim.shares import exceeds
from .trim.text import Span, TextSpan

__all__ = ["LAZY_MIN_CHARS", "LazyMeasurement"]

LAZY_MIN_CHARS = 20_000
# A window reaching further than this past its segment (a long text with no hard boundary): the
# chunk is encoded whole instead.
MAX_WINDOW_SLACK = 50_000
# A window over a text's head: at least this many characters a token it must hold (English runs
# about 4.5), and never over this share of the text (counting it whole is then no dearer).
HEAD_CHARS_PER_TOKEN = 6
HEAD_MAX_SHARE = 0.6
_EMPTY = ChunkAnalysis("", b"")

_new = tuple.__new__
Share = tuple[int, TextSpan | None]  # a segment's tokens, and where its text sits in an analysis


class _Place(NamedTuple):
    """Where a segment sits: its chunk, its index there and its character range (a named tuple:
    one is made per segment of the rendering, 4,000 for a 2,000-message chat, at under half a
    frozen dataclass's cost)."""

    chunk: int
    slot: int  # its index in the chunk
    start: int
    end: int
    segment: Segment


class LazyMeasurement:
    """One rendering's counts, made as they are asked for (one per fit: what it counted, and so
    what its report calls counted, depends only on the fit's own questions, not on caches)."""

    def __init__(
        self, rendering: Rendering, encoding: Encoding, *, lazy_min_chars: int = LAZY_MIN_CHARS
    ) -> None:
        self._encoding = encoding
        self._chunks = rendering.chunks
        self._texts = [chunk[0].text if len(chunk) == 1 else chunk_text(chunk) for chunk in rendering.chunks]
        self._proven = encoding.proven_boundaries
        if self._proven and max(map(len, self._texts), default=0) >= lazy_min_chars:
            self._windowed = [len(t) >= lazy_min_chars for t in self._texts]
        else:  # no chunk is long (a chat of short messages): none is looked into window by window
            self._windowed = [False] * len(self._texts)
        self._places: defaultdict[Owner, list[_Place]] = defaultdict(list)
        # A windowed place's run: the neighbouring places of the same owner, counted in one window.
        self._runs: dict[tuple[int, int], list[_Place]] = {}
        for n, chunk in enumerate(rendering.chunks):
            if len(chunk) == 1 and not self._windowed[n]:  # most chunks: one segment, encoded whole
                segment = chunk[0]
                # made as _Place(...) makes it, by tuple.__new__ (0.10 against 0.18 us)
                self._places[segment.owner].append(_new(_Place, (n, 0, 0, len(segment.text), segment)))
            else:
                self._place_chunk(n, chunk)
        self._constants: defaultdict[Owner, int] = defaultdict(int)
        for owner, tokens in rendering.constants_for(encoding.name):
            self._constants[owner] += tokens
        self._owners = tuple(dict.fromkeys([*self._places, *self._constants]))
        self._whole: dict[int, list[tuple[int, TextSpan]]] = {}
        self._shares: dict[tuple[int, int], Share] = {}
        self._short: dict[str, int] = {}  # tokens of a short chunk of one segment, by its text
        self._costs: dict[Owner, int] = {}
        self._bounds: dict[Owner, int] = {}
        self._spans: dict[ItemKey, Span | None] = {}
        self.sources: Sources = {}

    def _place_chunk(self, n: int, chunk: tuple[Segment, ...]) -> None:
        """The places of a chunk of several segments, or of a windowed one (with their runs)."""
        start, run = 0, None
        for index, segment in enumerate(chunk):
            place = _Place(n, index, start, start + len(segment.text), segment)
            self._places[segment.owner].append(place)
            if run is None or run[-1].segment.owner != segment.owner:
                run = []
            run.append(place)
            self._runs[n, index] = run
            start = place.end

    # ---- what decisions ask ------------------------------------------------------------------
    def cost(self, owner: Owner) -> int:
        """The owner's exact raw tokens (counted now if they were not yet)."""
        found = self._costs.get(owner)
        if found is None:
            found = self._constants.get(owner, 0)
            for place in self._places.get(owner, ()):
                found += self._share(place)[0] if place.segment.content else self._framing_share(place)
            self._costs[owner] = found
        return found

    def at_least(self, owner: Owner) -> int:
        """A lower bound of :meth:`cost` that tokenizes nothing (the cost itself once counted)."""
        found = self._costs.get(owner)
        if found is not None:
            return found
        bound = self._bounds.get(owner)
        if bound is None:
            bound = self._constants.get(owner, 0)
            if self._proven:
                for place in self._places.get(owner, ()):
                    text = place.segment.text
                    if len(text) >= SHORT_TEXT:  # a role or a name bounds nothing: no call for it
                        bound += tokens_at_least(text)
            self._bounds[owner] = bound
        return bound

    def reported(self, owner: Owner) -> tuple[int, bool]:
        """What a report line gives: the owner's count when :meth:`cost` was asked for it (True),
        else its :meth:`at_least` (False). One call a line of a long history."""
        found = self._costs.get(owner)
        if found is not None:
            return found, True
        return self.at_least(owner), False

    def framing(self, owner: Owner) -> int:
        """The owner's raw tokens that are not its text (its non-content segments and constants);
        the text itself is not tokenized for it."""
        tokens = self._constants.get(owner, 0)
        for place in self._places.get(owner, ()):
            if not place.segment.content:
                tokens += self._framing_share(place)
        return tokens

    def _framing_share(self, place: _Place) -> int:
        """A non-content place's tokens. A short chunk of one segment (a role, a name) is counted
        alone, so its tokens are its text's wherever it sits: read once a text, not once a message
        (the placeholder's framing asks every history message's, and each count of a message
        read its role's)."""
        text = place.segment.text
        if len(text) >= MIN_REUSE_CHARS or len(self._chunks[place.chunk]) != 1 or self._windowed[place.chunk]:
            return self._share(place)[0]
        found = self._short.get(text)
        if found is None:
            found = self._short[text] = self._share(place)[0]
        return found

    def span(self, key: ItemKey) -> Span | None:
        """Where the item's text sits in what was encoded (its pieces when it has several)."""
        if key not in self._spans:
            pieces = [
                (p.segment.text, self._share(p)[1]) for p in self._places.get(key, ()) if p.segment.content
            ]
            self._spans[key] = spans_of({key: pieces}).get(key) if pieces else None
        return self._spans[key]

    def head_span(self, key: ItemKey, tokens: int) -> TextSpan | None:
        """A span over the start of an uncounted item's one text that holds more than ``tokens``
        tokens, counted from a window over that start only (what cutting the text to ``tokens``
        reads), or None: the item is counted, has several texts, or the window would take most of
        the text (then the whole text is counted, once). The window starts and ends at hard
        boundaries, so its tokens are those of the whole chunk there.

        Its length is the text's characters a token by its lower bound (at least the true average:
        the bound is at most the count), times what it must hold, with a quarter to spare; doubled
        once if that falls short. A text whose head is sparser than its average (long words at
        the start) costs one wasted window: at most :data:`HEAD_MAX_SHARE` of the text."""
        places = [p for p in self._places.get(key, ()) if p.segment.content]
        if key in self._costs or len(places) != 1 or not self._windowed[places[0].chunk]:
            return None
        place, text = places[0], self._texts[places[0].chunk]
        tokens, length = max(0, tokens), place.end - place.start
        per_token = max(HEAD_CHARS_PER_TOKEN, length / max(1, self.at_least(key)))
        reach = math.ceil(per_token * (tokens + 1) * 1.25)
        left = last_boundary(text, place.start, MAX_WINDOW_SLACK)
        for _ in range(2):
            right = first_boundary(text, place.start + reach) if left is not None else None
            if right is None or right - place.start > HEAD_MAX_SHARE * length:
                return None
            analysis = analyze(self._encoding, text[left:right], ends=True)
            span = TextSpan(analysis, _utf8_size(text[left : place.start]), analysis.size)
            if span.tokens > tokens:
                return span
            reach *= 2
        return None

    def count_all(self) -> int:
        """Every owner counted exactly; their sum (long chunks mostly not looked into yet are
        encoded whole, on two threads, rather than window by window: one looked into for its
        question alone, 50,000 short documents were counted in 150,000 windows, 10x the time of
        counting the body)."""
        looked_into: defaultdict[int, int] = defaultdict(int)  # characters counted, by chunk
        for chunk, slot in self._shares:
            looked_into[chunk] += len(self._chunks[chunk][slot].text)
        for n, windowed in enumerate(self._windowed):
            if windowed and 2 * looked_into[n] < len(self._texts[n]):
                self._windowed[n] = False
        return sum(self.cost(owner) for owner in self._owners)

    def all_counted(self) -> bool:
        """Whether every owner has been counted exactly."""
        return len(self._costs) == len(self._owners)

    def bound_exceeds(self, limit: int, counted: Iterable[Owner] = ()) -> bool:
        """Whether the owners' bounds alone sum to more than ``limit`` (read only until they do).
        Their ceilings are read first: a request they show within ``limit`` (a body that fits,
        counted whole next) has no bound read (on a 100,000-token document the bound took 4.7 ms,
        as long as quicktok's encode of it; its ceiling 1.0-1.5 ms).

        The owners of ``counted`` are counted first, their counts standing for their bounds: those
        a fit counts whichever way it goes (the question it keeps and cuts: a 100,000-token one's
        ceiling and bound took 3.2 ms, before its encode)."""
        for owner in counted:
            self.cost(owner)
        if not exceeds(map(self._bound_ceiling, self._owners), limit):
            return False
        return exceeds(map(self.at_least, self._owners), limit)

    def _bound_ceiling(self, owner: Owner) -> int:
        """A number :meth:`at_least` does not exceed (the bound itself where nothing is cheaper)."""
        known = self._costs.get(owner, self._bounds.get(owner))
        if known is not None:
            return known
        if not self._proven:
            return self.at_least(owner)
        ceiling = self._constants.get(owner, 0)
        for place in self._places.get(owner, ()):
            found = at_least_ceiling(place.segment.text)
            if found is None:
                return self.at_least(owner)
            ceiling += found
        return ceiling

    def reported_total(self) -> int:
        """The tokens a report gives: counted owners exactly, the rest by their bound. Read from
        what is known, at once, when every owner has its count or bound already (a report asks
        for each item's line first: 2,000 calls of :meth:`at_least` less for a long history)."""
        known = {**self._bounds, **self._costs}  # an owner's count, else its bound
        found = list(map(known.get, self._owners))
        if None in found:
            return sum(self.at_least(owner) for owner in self._owners)
        return sum(found)  # type: ignore[arg-type]  # no None: checked above

    def fixed_parts(self) -> dict[str, int]:
        """Tokens of the parts that are counted but never trimmed (named, not items)."""
        return {o: n for o in self._owners if isinstance(o, str) and (n := self.cost(o))}

    # ---- counting ----------------------------------------------------------------------------
    def _share(self, place: _Place) -> Share:
        key = (place.chunk, place.slot)
        found = self._shares.get(key)
        if found is None:
            found = self._count(place)
            self._shares[key] = found
        return found

    def _count(self, place: _Place) -> Share:
        text = self._texts[place.chunk]
        if not text:
            return 0, None
        if not place.segment.text:
            return 0, TextSpan(_EMPTY, 0, 0)
        if self._windowed[place.chunk]:
            # An item's framing (markup around its text) is counted alone when a window of its own
            # can hold it: its text may be one that a decision only bounds, or cuts from its head
            # (``head_span``). Else (no hard boundary near it) it is counted with its text.
            run = self._runs[place.chunk, place.slot]
            for places in ([place], run) if not place.segment.content else (run,):
                windowed = self._window(places, text)
                if windowed is not None:
                    self._shares.update(
                        ((p.chunk, p.slot), share) for p, share in zip(places, windowed, strict=True)
                    )
                    return windowed[places.index(place)]
            self._windowed[place.chunk] = False
        return self._whole_shares(place.chunk)[place.slot]

    def _whole_shares(self, n: int) -> list[tuple[int, TextSpan]]:
        found = self._whole.get(n)
        if found is None:
            chunk = self._chunks[n]  # one segment's share is the whole count: no token's end read
            found = segment_shares(chunk, analyze(self._encoding, self._texts[n], ends=len(chunk) > 1))
            for segment, (_, span) in zip(self._chunks[n], found, strict=True):
                self._remember(segment.text, span)
            self._whole[n] = found
        return found

    def _window(self, run: list[_Place], text: str) -> list[Share] | None:
        """The run's segments' tokens from the window of hard boundaries around the run (None:
        too wide)."""
        first, last = run[0].start, run[-1].end
        left = last_boundary(text, first, MAX_WINDOW_SLACK)
        right = first_boundary(text, last) if last < len(text) else len(text)
        right = len(text) if right is None else right
        if left is None or right - last > MAX_WINDOW_SLACK:
            return None
        # a run that is its whole window is counted whole: no token's end is read
        analysis = analyze(
            self._encoding, text[left:right], ends=len(run) > 1 or (left, right) != (first, last)
        )
        shares: list[Share] = []
        start = _utf8_size(text[left:first])
        for place in run:
            end = start + _utf8_size(place.segment.text)
            span = TextSpan(analysis, start, end)
            self._remember(place.segment.text, span)
            shares.append((span.tokens, span))
            start = end
        return shares

    def _remember(self, text: str, span: TextSpan) -> None:
        """A long text's place, for splicing it into the count of what is sent (``measure``)."""
        if len(text) >= MIN_REUSE_CHARS:
            self.sources[text] = (span.analysis, span.byte_start, span.byte_end)


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))
