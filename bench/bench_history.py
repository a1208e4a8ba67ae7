"""The history fit against LangChain's ``trim_messages``, each cold in a fresh process.

The same 2,000-message chat history (histories.chat_history) trimmed to 8,000 tokens by each side.
Each measurement is one call in a new Python process, after the side's imports and the o200k
tokenizer's load (tiktoken's Encoding built on both sides), so neither side has counted these
messages before: ctxbudget's content-keyed
count cache is empty, and LangChain's counter is a plain tiktoken ``encode_ordinary`` over the same
vocabulary, with no cache. Two figures:

- first call: the call is the library's first in the process, so each side pays its own first-call
  costs (LangChain imports its runnables and tracers on its first ``trim_messages``, about
  0.4 s here; ctxbudget reads its model catalog on its first fit): what a CLI, a serverless
  function or a new worker feels;
- after a warm-up: each side first handles an unrelated two-message list, so the figure is the
  per-call cost of a long-running process.

ctxbudget's fit builds its report when the result's ``report`` is first read (LangChain's
``trim_messages`` makes none): its side is timed as a caller that sends the fitted messages, and
again with the report read (its line a message, in the same fresh-process runs).

The sides alternate, RUNS times; each figure is the ratio of the medians. The first call is then
measured again with both sides counting with quicktok (the ``fast`` extra), loaded before the
timed call: ctxbudget's engine attached, LangChain's counter calling quicktok's encoder.

    python bench/bench_history.py            # prints the figures
    python bench/bench_history.py --side ctxbudget|langchain [--warm] [--engine quicktok]   # one child
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchcli import bench_parser

RUNS = 7
BUDGET = 8_000
MESSAGES = 2_000


def _ctxbudget(warm: bool, engine: str, report: bool = False) -> float:
    from histories import MODEL, chat_history

    from ctxbudget import fit, get_encoding, use_fast_tokenizer

    # The tokenizer built, as LangChain's side has it: a short text alone is encoded by
    # ctxbudget's small-text path, which never builds tiktoken's Encoding (tokens/small.py), and
    # then this process's fit would count with that slower path where LangChain uses tiktoken.
    get_encoding("o200k_base").tiktoken.encode_ordinary("load")  # type: ignore[attr-defined]
    if engine == "quicktok":
        use_fast_tokenizer("o200k_base")
    history = chat_history(MESSAGES)
    if warm:
        fit({"messages": [{"role": "user", "content": "warm up"}]}, model=MODEL)
    started = time.perf_counter()
    result = fit(history, model=MODEL, max_context_tokens=BUDGET, reserve_output_tokens=0)
    if report and result.report.uncounted_items == 0:  # built when first read, here
        raise SystemExit("the history was expected to drop messages uncounted")
    return time.perf_counter() - started


def _langchain(warm: bool, engine: str) -> float:
    from histories import chat_history
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

    from ctxbudget import get_encoding

    tiktoken_encoding = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    history = chat_history(MESSAGES)

    encode = tiktoken_encoding.encode_ordinary
    if engine == "quicktok":
        import quicktok

        encode = quicktok.get_encoding("o200k_base").encode_ordinary

    def counter(messages: list[Any]) -> int:
        return sum(3 + len(encode(str(m.content))) for m in messages) + 3

    def trim(messages: list[Any]) -> Any:
        return trim_messages(
            messages,
            max_tokens=BUDGET,
            token_counter=counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    encode("load")
    if warm:
        trim([SystemMessage(content="warm"), HumanMessage(content="up")])
    messages = [kinds[m["role"]](content=m["content"]) for m in history["messages"]]
    started = time.perf_counter()
    trim(messages)
    return time.perf_counter() - started


def _child(side: str, warm: bool, engine: str, report: bool = False) -> float:
    command = [sys.executable, __file__, "--side", side, "--engine", engine]
    command += [*(["--warm"] if warm else []), *(["--report"] if report else [])]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip())


def _compare(warm: bool, engine: str = "tiktoken", report: bool = False) -> None:
    """The sides alternating; with ``report``, also ctxbudget's fit with its report read (built
    when first read: LangChain's side makes none)."""
    ours: list[float] = []
    theirs: list[float] = []
    reported: list[float] = []
    for _ in range(RUNS):
        ours.append(_child("ctxbudget", warm, engine))
        theirs.append(_child("langchain", warm, engine))
        if report:
            reported.append(_child("ctxbudget", warm, engine, report=True))
    mine, peer = statistics.median(ours), statistics.median(theirs)
    print(
        ("after a warm-up call on each side" if warm else "first call of each library in its process")
        + f", both counting with {engine}:"
    )
    print(f"  ctxbudget fit:              median {mine * 1000:7.1f} ms  (min {min(ours) * 1000:.1f})")
    print(f"  LangChain trim_messages:    median {peer * 1000:7.1f} ms  (min {min(theirs) * 1000:.1f})")
    print(f"  ratio: {mine / peer:.3f}x LangChain's time")
    if reported:
        read = statistics.median(reported)
        print(
            f"  ctxbudget fit, report read: median {read * 1000:7.1f} ms  (min {min(reported) * 1000:.1f}); "
            f"{read / peer:.3f}x LangChain's time"
        )


def _compiled() -> None:
    """ctxbudget's modules byte-compiled, as LangChain's are in site-packages (pip compiles a
    wheel when it installs it). An editable checkout under PYTHONDONTWRITEBYTECODE=1 (these
    machines set it) has no bytecode, and each child would compile the modules its first call
    imports (the chat format's, about 4 ms) inside the timed call."""
    import compileall

    import ctxbudget

    compileall.compile_dir(str(Path(ctxbudget.__file__).parent), quiet=1)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--side", choices=["ctxbudget", "langchain"])
    parser.add_argument("--warm", action="store_true", help="one warm-up call before the timed one")
    parser.add_argument("--engine", choices=["tiktoken", "quicktok"], default="tiktoken")
    parser.add_argument("--report", action="store_true", help="ctxbudget's side reads its report too")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.side == "ctxbudget":
        print(_ctxbudget(args.warm, args.engine, args.report))
        return
    if args.side:
        print(_langchain(args.warm, args.engine))
        return
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        print("skipped: langchain-core is not installed (pip install '.[bench]')")
        return
    _compiled()
    print(
        f"{MESSAGES:,}-message history into {BUDGET:,} tokens, cold, a fresh process a run ({RUNS} runs each)"
    )
    _compare(warm=False, report=True)
    _compare(warm=True, report=True)
    try:
        import quicktok  # noqa: F401
    except ImportError:
        print("no rows with quicktok: it is not installed (pip install -e '.[fast]')")
        return
    _compare(warm=False, engine="quicktok")


if __name__ == "__main__":
    main()
