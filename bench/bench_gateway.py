"""Gateway overhead per request (p50, p95) against calling the fake upstream directly, same run.

Loopback only: the test suite's fake upstream and the gateway run in this process on local ports;
400 sequential non-streaming requests each way, alternating, after a warm-up.

    python bench/bench_gateway.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchcli import bench_parser

from ctxbudget import get_encoding
from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.tokens.fast import FAST_ENCODINGS, use_fast_tokenizer
from tests.fake_upstream import FakeUpstream, Served

REQUESTS = 400
BODY = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief. " * 50},
        {"role": "user", "content": "What was the notice date?"},
    ],
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def gateway_and_upstream(
    timeout: float = 30, fast_tokenizer: bool = False
) -> Iterator[tuple[FakeUpstream, Any, Any, httpx.Client]]:
    """The fake upstream and a gateway in front of it (a throwaway store), both on loopback, and
    a client: (fake, upstream server, gateway server, client). With ``fast_tokenizer``, the
    tokenizer as ``ctxbudget serve --fast-tokenizer`` sets it at start-up (quicktok when
    installed; these servers run without the app's lifespan), else tiktoken as by default."""
    for name in FAST_ENCODINGS:
        use_fast_tokenizer(name, enabled=fast_tokenizer)
    fake = FakeUpstream()
    try:
        with tempfile.TemporaryDirectory() as folder, Served(fake.app) as upstream:
            config = GatewayConfig(
                anthropic_upstream=upstream.url,
                openai_upstream=upstream.url,
                store_path=str(Path(folder) / "bench.db"),
            )
            with Served(create_app(config)) as gateway, httpx.Client(timeout=timeout) as client:
                yield fake, upstream, gateway, client
    finally:
        for name in FAST_ENCODINGS:
            use_fast_tokenizer(name, enabled=False)


def main() -> None:
    bench_parser(__doc__).parse_args()
    with gateway_and_upstream() as (_, upstream, gateway, client):
        direct, proxied = [], []
        for n in range(REQUESTS + 20):
            for target, sink in ((upstream.url, direct), (gateway.url, proxied)):
                start = time.perf_counter()
                response = client.post(
                    target + "/v1/chat/completions",
                    json=BODY,
                    headers={"x-ctxbudget-session": f"bench-{n % 10}"},
                )
                elapsed = (time.perf_counter() - start) * 1000
                response.raise_for_status()
                if n >= 20:
                    sink.append(elapsed)
    d50, d95 = percentile(direct, 0.5), percentile(direct, 0.95)
    p50, p95 = percentile(proxied, 0.5), percentile(proxied, 0.95)
    print(f"tokenizer: {get_encoding('o200k_base').engine}")
    print(f"{'path':32} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'fake upstream directly':32} {d50:8.2f} {d95:8.2f}")
    print(f"{'through the gateway':32} {p50:8.2f} {p95:8.2f}")
    print(
        f"gateway overhead: p50 +{p50 - d50:.2f} ms ({p50 / d50:.2f}x), p95 +{p95 - d95:.2f} ms ({p95 / d95:.2f}x); "
        f"mean direct {statistics.mean(direct):.2f} ms over {len(direct)} requests"
    )


if __name__ == "__main__":
    main()
