"""Turns per second through three gateway replicas on one PostgreSQL store against one replica on an
SQLite file, the same load in the same run; and the store's share of the gateway's overhead.

Every gateway is a `ctxbudget serve` process in policy mode (legal-review: each turn reads the
session's previous turn and stores its own); the fake upstream runs in a process of its own. The
load: SESSIONS conversations of TURNS turns, CLIENTS at a time, turn t of session s sent to
replica (s + t) mod n. PostgreSQL runs with its defaults (fsync and synchronous commit on), as
SQLite runs with synchronous=FULL: each side commits durably. Then, sequentially, the mean
latency of a turn directly to the fake upstream and through each configuration, and the mean time
a turn's commit took (``ctxbudget_store_commit_seconds`` from the replicas' /metrics): the
store's share of the overhead is that commit time over (through the gateway - direct).

    python bench/bench_replicas.py [SESSIONS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from benchcli import bench_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_upstream import FAKE_MODELS, free_port  # noqa: E402
from tests.postgres_server import PostgresServer, find_bin_folder  # noqa: E402

TURNS = 6
CLIENTS = 12
SYSTEM = "You review leases for a careful legal team; answer from the record. " * 150
FAKE = "import uvicorn, sys; from tests.fake_upstream import FakeUpstream; " + (
    "uvicorn.run(FakeUpstream().app, host='127.0.0.1', port=int(sys.argv[1]), log_level='warning')"
)


def fake_upstream(port: int) -> list[str]:
    return [sys.executable, "-c", FAKE, str(port)]


@contextmanager
def process(command: Callable[[int], list[str]]) -> Iterator[str]:
    """A server process on a free port, once it answers HTTP: its base URL."""
    port = free_port()
    child = subprocess.Popen(command(port), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        child.terminate()
        child.wait(timeout=20)


def replica(store: str, upstream: str) -> Callable[[int], list[str]]:
    return lambda port: [
        sys.executable, "-m", "ctxbudget", "serve", "--port", str(port), "--store", store,
        "--anthropic-upstream", upstream, "--policy", "legal-review", "--catalog", str(FAKE_MODELS),
    ]  # fmt: skip


def body(session: int, turn: int) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    for t in range(turn + 1):
        messages.append(
            {"role": "user", "content": f"Session {session}, question {t}: which clause governs notice?"}
        )
        if t < turn:
            messages.append({"role": "assistant", "content": f"echo: question {t}"})
    return {"model": "claude-sonnet-4-6", "max_tokens": 50, "system": SYSTEM, "messages": messages}


def post(client: httpx.Client, url: str, session: str, payload: dict[str, Any]) -> None:
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "x-ctxbudget-session": session}
    client.post(url + "/v1/messages", json=payload, headers=headers).raise_for_status()


def load(urls: list[str], sessions: int, tag: str) -> float:
    """Turns per second for the whole load."""

    def conversation(session: int) -> None:
        with httpx.Client(timeout=60) as client:
            for turn in range(TURNS):
                post(client, urls[(session + turn) % len(urls)], f"{tag}-{session}", body(session, turn))

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        list(pool.map(conversation, range(sessions)))
    return sessions * TURNS / (time.perf_counter() - start)


def latency(url: str, tag: str, rounds: int = 40) -> float:
    """Mean ms of a turn sent alone (sequential conversations of TURNS turns)."""
    times = []
    with httpx.Client(timeout=60) as client:
        for n in range(rounds // TURNS + 1):
            for turn in range(TURNS):
                start = time.perf_counter()
                post(client, url, f"{tag}-{n}", body(n, turn))
                times.append((time.perf_counter() - start) * 1000)
    return statistics.mean(times[TURNS:])  # the first conversation warms up


def commits(url: str) -> tuple[float, float]:
    """A replica's commit histogram so far: (seconds in all, commits)."""
    total = count = 0.0
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("ctxbudget_store_commit_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("ctxbudget_store_commit_seconds_count"):
            count = float(line.split()[-1])
    return total, count


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "sessions", nargs="?", type=int, default=60, help="sessions each load sends (default 60)"
    )
    sessions = parser.parse_args().sessions
    bin_folder = find_bin_folder()
    if bin_folder is None:
        sys.exit("no PostgreSQL server binaries (initdb, pg_ctl): install postgresql")
    server = PostgresServer.start(bin_folder, durable=True)
    try:
        with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
            upstream = stack.enter_context(process(fake_upstream))
            shared = server.database()
            sqlite = [stack.enter_context(process(replica(str(Path(folder) / "s.db"), upstream)))]
            pg = [stack.enter_context(process(replica(shared, upstream))) for _ in range(3)]
            report(upstream, sqlite, pg, sessions)
    finally:
        server.stop()


def report(upstream: str, sqlite: list[str], pg: list[str], sessions: int) -> None:
    load(sqlite, 6, "warm")  # warm-up: figures dropped
    load(pg, 6, "warm")
    one, three = load(sqlite, sessions, "a"), load(pg, sessions, "b")
    one_again = load(sqlite, sessions, "c")  # the baseline again: the machine's drift in the run
    baseline = (one + one_again) / 2
    print(f"{'configuration':40} {'turns/s':>9}")
    print(f"{'one replica, SQLite (mean of two runs)':40} {baseline:9.1f}   ({one:.1f}, {one_again:.1f})")
    print(f"{'three replicas, PostgreSQL':40} {three:9.1f}   {three / baseline:.2f}x")
    direct = latency(upstream, "d")
    for name, url in (("SQLite", sqlite[0]), ("PostgreSQL", pg[0])):
        before = commits(url)
        through = latency(url, f"l{name}")
        after = commits(url)
        commit = (after[0] - before[0]) / max(1.0, after[1] - before[1]) * 1000
        overhead = through - direct
        print(
            f"{name}: a turn {through:.2f} ms through the gateway, {direct:.2f} ms direct; overhead "
            f"{overhead:.2f} ms, of which the commit {commit:.2f} ms ({commit / overhead:.0%})"
        )


if __name__ == "__main__":
    main()
