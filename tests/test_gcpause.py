"""The cycle collector pause: scoped, counted across nested and concurrent bodies, and never
enabling a collector that the caller had disabled."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from ctxbudget import fit, gcpause
from ctxbudget.gcpause import collector_paused


def test_nested_pauses_restore_the_collector_when_the_last_ends() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_still_restores_the_collector() -> None:
    try:
        with collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_concurrent_overlapping_bodies_restore_the_collector_once_all_end() -> None:
    entered = threading.Barrier(4)
    leave = threading.Event()

    def body() -> None:
        with collector_paused():
            entered.wait()
            leave.wait()

    threads = [threading.Thread(target=body) for _ in range(3)]
    for thread in threads:
        thread.start()
    entered.wait()
    assert not gc.isenabled()
    leave.set()
    for thread in threads:
        thread.join()
    assert gc.isenabled()


def test_a_fit_leaves_the_collector_as_it_found_it() -> None:
    body = {"messages": [{"role": "user", "content": "hello " * 50}]}
    fit(body, model="gpt-4o", max_context_tokens=40, reserve_output_tokens=0, on_overflow="empty")
    assert gc.isenabled()


def test_overlapping_bodies_do_not_hold_the_collector_off_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server fitting on several threads always has a fit running: bodies that overlap in a
    chain (each starts before the last ends) kept the collector paused for the whole chain, and
    the cyclic garbage made meanwhile was never collected. A pause admits bodies for
    LONGEST_JOIN seconds; then it ends with its last member and the collector runs."""

    class Node:
        def __init__(self) -> None:
            self.me = self

    made: weakref.WeakSet[Node] = weakref.WeakSet()
    now = [0.0]
    monkeypatch.setattr(gcpause, "_clock", lambda: now[0], raising=False)
    gc.collect()
    running = collector_paused()
    running.__enter__()
    enabled = []
    for _ in range(100):  # a body every 0.02 s, each lasting 0.04 s
        now[0] += 0.02
        following = collector_paused()
        following.__enter__()
        made.update(Node() for _ in range(1000))  # what a request leaves: cycles (tracebacks, ...)
        running.__exit__(None, None, None)
        running = following
        enabled.append(gc.isenabled())
    alive = len(made)
    running.__exit__(None, None, None)
    assert any(enabled)
    assert alive < 20_000, f"{alive:,} of 100,000 garbage cycles uncollected while bodies overlapped"
