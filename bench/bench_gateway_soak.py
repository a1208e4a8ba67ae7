"""Memory of a long-running gateway: 10,000 distinct sessions (one request each), RSS sampled every
2,000 requests, reported as growth over the first sample (same run, same process).

Per-session state (policy mode's previous turn) is bounded and metric labels are catalog
ids only, so resident memory should stay flat while the session count grows. Loopback only.

    python bench/bench_gateway_soak.py [SESSIONS]
"""

from __future__ import annotations

import resource
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchcli import bench_parser

from ctxbudget.gateway import GatewayConfig, create_app
from tests.fake_upstream import FakeUpstream, Served


def rss_mb() -> float:
    """Current resident set size (Linux /proc), else the peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "sessions", nargs="?", type=int, default=10_000, help="distinct sessions (default 10,000)"
    )
    sessions = parser.parse_args().sessions
    fake = FakeUpstream()
    samples: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as folder, Served(fake.app) as upstream:
        config = GatewayConfig(
            anthropic_upstream=upstream.url,
            openai_upstream=upstream.url,
            store_path=str(Path(folder) / "soak.db"),
            max_sessions_in_memory=1024,
        )
        app = create_app(config)
        with Served(app) as gateway, httpx.Client(timeout=30) as client:
            for n in range(sessions):
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"question {n}?"}]}
                response = client.post(
                    gateway.url + "/v1/chat/completions", json=body, headers={"x-ctxbudget-session": f"s-{n}"}
                )
                response.raise_for_status()
                fake.received.clear()  # the fake keeps what it saw; the gateway is what is measured
                fake.headers.clear()
                if (n + 1) % 2000 == 0:
                    samples.append((n + 1, rss_mb()))
        state = len(app.state.gateway._previous)
    first = samples[0][1]
    for count, mb in samples:
        print(f"after {count:>6,} sessions: RSS {mb:7.1f} MB ({mb / first:.3f}x the first sample)")
    print(f"per-session entries held in memory at the end: {state} (policy mode only; bound 1,024)")


if __name__ == "__main__":
    main()
