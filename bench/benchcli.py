"""The benchmarks' command line: each takes ``--help`` (its docstring) and checks its arguments."""

from __future__ import annotations

import argparse


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose help is the benchmark's docstring, laid out as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
