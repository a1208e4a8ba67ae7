from __future__ import annotations

from typing import Any

from ctxbudget.cache import Block, Breakpoint, plan_breakpoints, predict_cache, prefix_hashes
from ctxbudget.catalog.values import CacheRules

EXPLICIT = CacheRules(mode="explicit", min_cacheable_tokens=1024, max_breakpoints=4)


def _blocks(n: int) -> list[Block]:
    return [
        Block(
            region="system",
            role="system",
            text=f"tier {i}",
            tier=f"t{i}",
            cached=True,
            ttl="1h" if i == 0 else "5m",
        )
        for i in range(n)
    ]


def test_breakpoints_skip_short_prefixes_and_respect_the_maximum() -> None:
    blocks = _blocks(6)
    prefix = [500, 1500, 2000, 2500, 3000, 3500]
    points, warnings = plan_breakpoints(blocks, prefix, prefix_hashes("m", blocks), EXPLICIT)
    # the earliest cacheable end, then the latest ones (later content changes more often)
    assert [p.block for p in points] == [1, 3, 4, 5]
    assert all(p.prefix_tokens >= 1024 for p in points)
    assert any("t0" in w for w in warnings)
    # t2's region is cached but left unmarked (four at most): said, not silent.
    assert any("after t2:" in w and "at most 4 breakpoints" in w for w in warnings)


def test_breakpoints_far_apart_in_one_request_are_no_warning() -> None:
    """Each mark is looked up on its own: two marks 30 blocks apart (a long ledger between the
    stable tiers and its end) lose nothing, and every turn of a long session warned "(> 20)"."""
    blocks = _blocks(2) + [
        Block(region="system", role="system", text=f"entry {n}", tier="ledger", cached=True)
        for n in range(30)
    ]
    prefix = [2000 + 100 * i for i in range(len(blocks))]
    points, warnings = plan_breakpoints(blocks, prefix, prefix_hashes("m", blocks), EXPLICIT)
    assert [p.block for p in points] == [0, 1, 31] and warnings == []


def test_automatic_caching_plans_every_cacheable_region_end_unmarked() -> None:
    blocks = _blocks(3)
    rules = CacheRules(mode="automatic", min_cacheable_tokens=1024, max_breakpoints=0)
    points, _ = plan_breakpoints(blocks, [800, 1200, 1600], prefix_hashes("m", blocks), rules)
    assert [(p.block, p.explicit) for p in points] == [(1, False), (2, False)]


def test_automatic_caching_reads_a_prefix_far_back_that_still_matches() -> None:
    """OpenAI reads the longest prefix it saw before, however many blocks follow it (Anthropic
    looks back 20 blocks from a mark): the pinned prompt after the rolling history moved on."""
    blocks = _blocks(30)
    tokens = [1300 + 100 * i for i in range(30)]
    hashes = prefix_hashes("m", blocks)
    rules = CacheRules(mode="automatic", min_cacheable_tokens=1024, max_breakpoints=0)
    points, _ = plan_breakpoints(blocks, tokens, hashes, rules)
    previous = frozenset({hashes[0], "a prefix of the previous turn's that no longer matches"})
    automatic = predict_cache(points, 5000, previous, "automatic", hashes, tokens)
    assert automatic.read_tokens == 1280  # the first block's 1,300 tokens, in 128-token steps
    explicit = predict_cache(points[-1:], 5000, previous, "explicit", hashes, tokens)
    assert explicit.read_tokens == 0  # 29 blocks back from the one mark: out of reach


def _point(block: int, tokens: int, sha: str, ttl: str = "5m") -> Breakpoint:
    return Breakpoint(
        block=block, tier=f"t{block}", ttl=ttl, prefix_tokens=tokens, prefix_sha256=sha, explicit=True
    )  # type: ignore[arg-type]


def test_prediction_reads_the_longest_cached_prefix_and_writes_the_rest() -> None:
    points = [_point(0, 2000, "a", "1h"), _point(1, 3000, "b"), _point(2, 5000, "c")]
    cold = predict_cache(points, 6000, frozenset(), "explicit")
    assert (cold.read_tokens, cold.write_1h_tokens, cold.write_5m_tokens, cold.uncached_tokens) == (
        0,
        2000,
        3000,
        1000,
    )
    warm = predict_cache(points, 6000, frozenset({"a", "b"}), "explicit")
    assert (warm.read_tokens, warm.write_tokens, warm.uncached_tokens) == (3000, 2000, 1000)
    assert warm.statuses == ("read", "read", "write")
    assert warm.per_breakpoint == ((2000, 0), (1000, 0), (0, 2000))


def test_prefix_hashes_change_from_the_first_changed_block_on() -> None:
    a = _blocks(3)
    b = [*a[:1], Block(region="system", role="system", text="changed", tier="t1", cached=True), a[2]]
    ha, hb = prefix_hashes("m", a), prefix_hashes("m", b)
    assert ha[0] == hb[0] and ha[1] != hb[1] and ha[2] != hb[2]


def test_a_five_minute_breakpoint_before_an_hour_one_is_written_for_an_hour() -> None:
    """The Messages API refuses a 1-hour mark after a 5-minute one: a 5-minute breakpoint (a
    ledger's) before a 1-hour one (a tier the policy caches for an hour) becomes a 1-hour one."""
    blocks = [
        Block(region="system", role="", text="rules " * 900, tier="pinned", cached=True, ttl="1h"),
        Block(region="system", role="", text="ledger " * 900, tier="ledger", cached=True, ttl="5m"),
        Block(region="message", role="user", text="history " * 900, tier="volatile", cached=True, ttl="1h"),
        Block(region="message", role="user", text="question", tier="current", cached=False),
    ]
    rules = CacheRules(mode="explicit", min_cacheable_tokens=1024, max_breakpoints=4)
    prefix = [900, 1800, 2700, 2701]
    points, warnings = plan_breakpoints(blocks, prefix, prefix_hashes("m", blocks), rules)
    assert [(p.tier, p.ttl) for p in points][-2:] == [("ledger", "1h"), ("volatile", "1h")]
    assert any("after ledger is written for 1 hour" in w for w in warnings)


def test_a_model_taking_one_breakpoint_gets_one() -> None:
    blocks = _blocks(4)
    prefix = [1500, 2000, 2500, 3000]
    one = CacheRules(mode="explicit", min_cacheable_tokens=1024, max_breakpoints=1)
    points, warnings = plan_breakpoints(blocks, prefix, prefix_hashes("m", blocks), one)
    assert [p.block for p in points] == [0]  # the earliest, longest-lived; not every region
    assert any("at most 1 breakpoint (" in w for w in warnings)


def test_a_cached_prefix_lives_from_its_last_use_not_from_the_last_turn() -> None:
    """A call uses the prefix it reads and those it writes; a shorter prefix it only passes over
    is not refreshed. The prediction took every breakpoint of the previous turn as used, and over-
    predicted reads once such an entry had expired (as the simulation's billing found)."""
    from ctxbudget import assemble

    def request(history: str, background: str) -> dict[str, Any]:
        items = [
            {"id": "p", "tier": "pinned", "kind": "playbook", "text": "Clause 1. Cite page:line. " * 800},
            {"id": "EV-1", "tier": "critical", "kind": "evidence", "text": "Q. Notice?\nA. Yes. " * 300},
            {"id": "bg", "tier": "contextual", "kind": "document", "text": background},
            {"id": "h", "tier": "volatile", "kind": "history", "text": history},
            {"id": "q", "kind": "question", "text": "Was notice given?"},
        ]
        return {"items": items}

    def turn(
        history: str, previous: Any = None, idle: float | None = None, background: str = "Lot 44. " * 600
    ) -> Any:
        body = request(history, background)
        return assemble(
            body, policy="legal-review", model="claude-sonnet-4-5", previous=previous, idle_seconds=idle
        ).report

    first = turn("We reviewed EX-04. " * 40)
    second = turn("We reviewed EX-04. " * 40 + "Then EX-05. " * 40, first, 200)
    ages = {e.prefix_sha256: e.age_seconds for e in second.cache_entries}
    by_tier = {b.tier: b for b in first.breakpoints}
    read = max((b for b in second.breakpoints if b.status == "read"), key=lambda b: b.prefix_tokens)
    assert ages[read.prefix_sha256] == 0  # read: used now
    assert ages[by_tier["critical"].prefix_sha256] == 200  # passed over: as old as its last use
    # 200 s later, the background changed: the critical tier's entry is 400 s old and gone (5
    # minutes), so only the playbook's (an hour) is read
    third = turn("Another account. " * 40, second, 200, background="Lot 45 shipped on time. " * 300)
    assert third.cache.read_tokens == by_tier["pinned"].prefix_tokens < by_tier["critical"].prefix_tokens
    # an older report (breakpoints alone) is read as before: each one used by its call
    legacy = {k: v for k, v in first.to_dict().items() if k != "cache_entries"}
    assert (
        turn("We reviewed EX-04. " * 40, legacy, 0).cache.read_tokens
        == turn("We reviewed EX-04. " * 40, first, 0).cache.read_tokens
    )


def test_an_older_reports_unknown_ttl_is_read_as_five_minutes_and_not_carried_on() -> None:
    """A legacy report's breakpoint with ttl "2h" was carried into cache_entries, and the next
    turn refused it."""
    from ctxbudget.assembly._previous import live_entries

    legacy = {
        "breakpoints": [{"prefix_sha256": "a" * 64, "ttl": "2h"}, {"prefix_sha256": "b" * 64, "ttl": "1h"}]
    }
    assert live_entries(legacy, None) == {"a" * 64: ("5m", 0.0), "b" * 64: ("1h", 0.0)}
    assert set(live_entries(legacy, 600)) == {"b" * 64}  # ten minutes: the five-minute one is gone


def test_a_reports_cache_entries_are_checked_before_they_are_read() -> None:
    import pytest

    from ctxbudget import InvalidRequestError
    from ctxbudget.assembly._previous import live_entries

    good = {"prefix_sha256": "a" * 64, "ttl": "5m", "age_seconds": 10}
    assert live_entries({"cache_entries": [good]}, 100) == {"a" * 64: ("5m", 110.0)}
    for bad in (
        {**good, "ttl": []},
        {**good, "ttl": "2h"},
        {**good, "age_seconds": -1},
        {**good, "age_seconds": True},
        "x",
    ):
        with pytest.raises(InvalidRequestError, match=r"\$\.cache_entries\[0\]"):
            live_entries({"cache_entries": [bad]}, None)


def test_verify_prefix_tells_apart_what_the_provider_renders_differently() -> None:
    """A tool schema's keys reordered, a system message's name added, a system message sent as a
    developer one: each was reported as the same cached prefix."""
    from ctxbudget.assembly import compare_prefixes

    tool = {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    reordered = {"input_schema": tool["input_schema"], "name": "search"}
    system = [{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}}]
    a = {"model": "claude-sonnet-4-5", "tools": [tool], "system": system}
    assert compare_prefixes(a, {**a, "tools": [reordered]}, strict=False).offset is not None
    moved = [{"type": "text", "text": "Rules."}]  # the mark moved off: no cached byte changes
    assert compare_prefixes(a, {**a, "system": moved}, strict=False).offset is None
    chat = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "Rules."}, {"role": "user", "content": "q"}],
    }
    named = {**chat, "messages": [{"role": "system", "content": "Rules.", "name": "x"}, chat["messages"][1]]}
    developer = {**chat, "messages": [{"role": "developer", "content": "Rules."}, chat["messages"][1]]}
    assert compare_prefixes(chat, named, strict=False).offset is not None
    assert compare_prefixes(chat, developer, strict=False).offset is not None
    assert (
        compare_prefixes(
            chat,
            {**chat, "messages": [*chat["messages"], {"role": "assistant", "content": "a"}]},
            strict=False,
        ).offset
        is None
    )
