"""The benchmarks' command line: each takes ``--help`` (its docstring) and checks its arguments."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose help is the benchmark's docstring, laid out as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def cpu_speeds(seconds: Callable[[], float]) -> str:
    """What ``seconds()`` measures (an action's median time: ``bench_fit.median_seconds``) with
    this thread held to each CPU it may run on, as a line to print (Linux; empty elsewhere). On
    the shared 2-vCPU machines one vCPU often runs 1.5-1.7x slower than the other, and which one
    changes within minutes (PERF_LOG.md, stop 58): a benchmark whose threads run on both reads
    that state too. Call it last: a thread started while this one is held inherits its CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return ""
    allowed = os.sched_getaffinity(0)
    speeds = []
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
            speeds.append(f"cpu{cpu} {seconds() * 1000:.2f} ms")
    finally:
        os.sched_setaffinity(0, allowed)
    return "the floor held to each CPU: " + ", ".join(speeds)
