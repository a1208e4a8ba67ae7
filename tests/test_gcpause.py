"""The cycle collector pause: scoped, counted across nested and concurrent bodies, and never
enabling a collector that the caller had disabled."""

from __future__ import annotations

import gc
import threading

from ctxbudget import fit
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
