"""Start-up, each figure against its peer in the same run (fresh processes, medians).

- `import ctxbudget` against `import tiktoken`.
- `ctxbudget count` of a tiny body (the CLI: import, catalog, building o200k, one count), with the
  vocabulary image and without it, against stock tiktoken loading o200k from its own cache file
  and encoding one word (its cache is filled here from the same bundled vocabulary, so nothing is
  downloaded: the peer reads a file as it would after its first run).
- A gateway worker (`ctxbudget serve`) from process start to its first answer, against the 1 s
  target.
- `ctxbudget assemble --json` of the legal example, and `ctxbudget session add --json` of its
  question to a session made from the rest of it (a copy of the same store each run, so that
  every run adds turn 1), against stock tiktoken loading o200k from its cache file and encoding
  the example's texts once: the least a command that counts them exactly must do. The three are
  started in turns (one of each a round), so that the machine's state weighs on each alike.

    python bench/bench_startup.py [RUNS] [--legal build/legal_context.json]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchcli import bench_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
PEER = "import tiktoken; tiktoken.get_encoding('o200k_base').encode('hello')"
# The peer of a command reading the legal example: o200k loaded by tiktoken, the texts encoded.
LEGAL_PEER = (
    "import json, sys, tiktoken; enc = tiktoken.get_encoding('o200k_base'); "
    "items = json.load(open(sys.argv[1], encoding='utf-8'))['items']; "
    "enc.encode_ordinary('\\n'.join(item['text'] for item in items))"
)


def timed(command: list[str], env: dict[str, str], before: Callable[[], None] | None = None) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median(command: list[str], env: dict[str, str], runs: int) -> float:
    timed(command, env)  # warm the page cache
    return statistics.median(timed(command, env) for _ in range(runs))


def fill_tiktoken_cache(folder: Path) -> None:
    """tiktoken's own cache file for o200k, from the bundled (hash-checked) vocabulary."""
    from ctxbudget.tokens.bundled import _read_vocabulary

    key = hashlib.sha1(O200K_URL.encode()).hexdigest()
    (folder / key).write_bytes(_read_vocabulary("o200k_base"))


def first_answer(env: dict[str, str], folder: Path) -> float:
    """Seconds from starting `ctxbudget serve` to its first answer (through the fake upstream)."""
    import httpx

    from tests.fake_upstream import FakeUpstream, Served, free_port

    with Served(FakeUpstream().app) as upstream:
        port = free_port()
        start = time.perf_counter()
        command = [sys.executable, "-m", "ctxbudget", "serve", "--port", str(port)]
        command += ["--store", str(folder / f"first-{port}.db"), "--openai-upstream", upstream.url]
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        try:
            while True:
                try:
                    httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=10)
                    return time.perf_counter() - start
                except httpx.HTTPError:
                    time.sleep(0.01)
        finally:
            child.terminate()
            child.wait(timeout=20)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("runs", nargs="?", type=int, default=5, help="fresh workers started (default 5)")
    parser.add_argument(
        "--legal",
        type=Path,
        default=ROOT / "build" / "legal_context.json",
        help="the legal example (make build/legal_context.json)",
    )
    arguments = parser.parse_args()
    runs, legal = arguments.runs, arguments.legal
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "tiktoken").mkdir()
        fill_tiktoken_cache(folder / "tiktoken")
        tiny = folder / "tiny.json"
        tiny.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}))
        # The same cache state for both sides: compiled modules (tiktoken's, from site-packages,
        # and ctxbudget's, from src/) are written on the warm-up run into one folder and read
        # after, whatever PYTHONDONTWRITEBYTECODE the shell sets.
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base |= {
            "TIKTOKEN_CACHE_DIR": str(folder / "tiktoken"),
            "PYTHONPATH": str(ROOT / "src"),
            "PYTHONPYCACHEPREFIX": str(folder / "pyc"),
        }
        images = {**base, "CTXBUDGET_CACHE_DIR": str(folder / "images")}
        no_image = {**base, "CTXBUDGET_CACHE_DIR": "off"}
        python, cli = (
            [sys.executable, "-c"],
            [sys.executable, "-m", "ctxbudget", "count", str(tiny), "--model", "gpt-4o"],
        )
        rows = [
            ("import tiktoken (peer)", median([*python, "import tiktoken"], base, runs)),
            ("import ctxbudget", median([*python, "import ctxbudget"], base, runs)),
            ("tiktoken: load o200k + encode (peer)", median([*python, PEER], base, runs)),
            ("ctxbudget count, vocabulary image", median(cli, images, runs)),
            ("ctxbudget count, no image", median(cli, no_image, runs)),
        ]
        first = statistics.median(first_answer(images, folder) for _ in range(3))
    peers = {"import ctxbudget": rows[0][1], "ctxbudget count, vocabulary image": rows[2][1]}
    peers["ctxbudget count, no image"] = rows[2][1]
    print(f"{'step (fresh processes, median of ' + str(runs) + ')':44} {'s':>7} {'x peer':>7}")
    for label, seconds in rows:
        ratio = f"{seconds / peers[label]:.2f}" if label in peers else ""
        print(f"{label:44} {seconds:7.3f} {ratio:>7}")
    print(f"{'gateway worker: start to first answer':44} {first:7.3f}   (target <= 1 s)")
    if legal.is_file():
        legal_rows(legal, runs)
    else:
        print(f"(the legal example's rows need {legal}: make build/legal_context.json)")


def legal_rows(legal: Path, runs: int) -> None:
    """The legal example assembled, and added as a session's turn, by the CLI in fresh processes,
    against tiktoken's load and one encode of its texts, in rounds of one each."""
    items = json.loads(legal.read_text("utf-8"))["items"]
    question = next(item["text"] for item in items if item.get("kind") == "question")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "tiktoken").mkdir()
        fill_tiktoken_cache(folder / "tiktoken")
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base |= {
            "TIKTOKEN_CACHE_DIR": str(folder / "tiktoken"),
            "PYTHONPATH": str(ROOT / "src"),
            "PYTHONPYCACHEPREFIX": str(folder / "pyc"),
            "CTXBUDGET_CACHE_DIR": str(folder / "images"),
        }
        session_base = folder / "base.json"
        session_base.write_text(json.dumps({"items": [i for i in items if i.get("kind") != "question"]}))
        template, store = folder / "template.db", folder / "run.db"
        cli = [sys.executable, "-m", "ctxbudget"]
        made = [*cli, "session", "new", "legal", "--base", str(session_base), "--model", "claude-sonnet-4-5"]
        subprocess.run([*made, "--store", str(template)], env=base, check=True, stdout=subprocess.DEVNULL)

        def fresh_store() -> None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{store}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(template, store)

        commands: dict[str, tuple[list[str], Callable[[], None] | None]] = {
            "tiktoken: load o200k + encode its texts (peer)": (
                [sys.executable, "-c", LEGAL_PEER, str(legal)],
                None,
            ),
            "ctxbudget assemble --json": (
                [*cli, "assemble", str(legal), "--model", "claude-sonnet-4-5", "--json"],
                None,
            ),
            "ctxbudget session add --json (turn 1)": (
                [*cli, "session", "add", "legal", "--question", question, "--store", str(store), "--json"],
                fresh_store,
            ),
        }
        samples: dict[str, list[float]] = {label: [] for label in commands}
        for round_ in range(runs + 1):  # the first round warms the page cache and compiles
            for label, (command, before) in commands.items():
                seconds = timed(command, base, before)
                if round_:
                    samples[label].append(seconds)
    medians = {label: statistics.median(values) for label, values in samples.items()}
    peer = next(iter(medians.values()))
    print(f"{'the legal example, fresh processes (median of ' + str(runs) + ')':52} {'s':>7} {'x peer':>7}")
    for label, seconds in medians.items():
        print(f"{label:52} {seconds:7.3f} {seconds / peer:7.2f}")


if __name__ == "__main__":
    main()
