"""Gateway overhead per request (p50, p95) against calling the fake upstream directly, same run.

Loopback only: the test suite's fake upstream and the gateway run in this process on local ports;
400 sequential non-streaming requests each way, alternating, after a warm-up. A third path, in
the same rounds, is a bare proxy: a Starlette route that forwards the body with an
``httpx.AsyncClient`` as the gateway's (no reading, fitting or storing): what the HTTP stack and
the second hop cost alone, so the overhead's share that is ctxbudget's own is read beside it.

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
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

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


def bare_proxy(upstream: str) -> Starlette:
    """An app that forwards ``POST /v1/chat/completions`` to ``upstream`` as it came and answers
    what the upstream answered: the HTTP stack and the second hop, nothing of ctxbudget's."""
    client = httpx.AsyncClient(base_url=upstream)

    async def forward(request: Request) -> Response:
        body = await request.body()
        answer = await client.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", forward, methods=["POST"])])


def main() -> None:
    bench_parser(__doc__).parse_args()
    with (
        gateway_and_upstream() as (_, upstream, gateway, client),
        Served(bare_proxy(upstream.url)) as bare,
    ):
        direct, proxied, barely = [], [], []
        for n in range(REQUESTS + 20):
            for target, sink in ((upstream.url, direct), (gateway.url, proxied), (bare.url, barely)):
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
    b50, b95 = percentile(barely, 0.5), percentile(barely, 0.95)
    print(f"{'through a bare proxy (reference)':32} {b50:8.2f} {b95:8.2f}")
    print(
        f"a bare proxy's overhead: p50 +{b50 - d50:.2f} ms, p95 +{b95 - d95:.2f} ms (the HTTP stack and the hop alone)"
    )
    print(
        f"gateway overhead: p50 +{p50 - d50:.2f} ms ({p50 / d50:.2f}x), p95 +{p95 - d95:.2f} ms ({p95 / d95:.2f}x); "
        f"mean direct {statistics.mean(direct):.2f} ms over {len(direct)} requests"
    )


if __name__ == "__main__":
    main()
