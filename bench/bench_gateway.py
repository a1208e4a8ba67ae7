"""Gateway overhead per request (p50, p95) against calling the fake upstream directly, same run.

Loopback only: the test suite's fake upstream and the gateway run in this process on local ports;
400 sequential non-streaming requests each way, alternating, after a warm-up. A third path, in
the same rounds, is a bare proxy: a Starlette route that forwards the body with an
``httpx.AsyncClient`` as the gateway's (no reading, fitting or storing): what the HTTP stack and
the second hop cost alone, so the overhead's share that is ctxbudget's own is read beside it.

Then the same rounds with each server in a process of its own, as deployed: the fake upstream,
``ctxbudget serve`` in front of it (its own event loop, access log and store), and the bare
proxy; this process only sends. In one process the client's and the upstream's threads hold the
GIL the gateway waits for; deployed, they do not, but its access log is written and its process
is scheduled apart. On the 2-vCPU machines the two shapes gave the same overhead (stop 66, twelve
runs each: p95 +4.6 to +6.1 ms deployed, +3.7 to +5.9 in one process). The deployed rounds
open with each server's first request after it starts, timed alone (the gateway's used to build
its tokenizer: docs/gateway.md, "Start-up").

    python bench/bench_gateway.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
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
from tests.fake_upstream import FakeUpstream, Served, free_port

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


def rounds(urls: list[str], client: httpx.Client) -> list[list[float]]:
    """:data:`REQUESTS` rounds after 20 unmeasured, one request to each of ``urls`` a round, in
    order: each URL's times in ms."""
    samples: list[list[float]] = [[] for _ in urls]
    for n in range(REQUESTS + 20):
        for url, sink in zip(urls, samples, strict=True):
            start = time.perf_counter()
            response = client.post(
                url + "/v1/chat/completions", json=BODY, headers={"x-ctxbudget-session": f"bench-{n % 10}"}
            )
            elapsed = (time.perf_counter() - start) * 1000
            response.raise_for_status()
            if n >= 20:
                sink.append(elapsed)
    return samples


def report(direct: list[float], proxied: list[float], barely: list[float]) -> None:
    """The three paths' p50 and p95, and the overheads over the direct requests."""
    d50, d95 = percentile(direct, 0.5), percentile(direct, 0.95)
    p50, p95 = percentile(proxied, 0.5), percentile(proxied, 0.95)
    b50, b95 = percentile(barely, 0.5), percentile(barely, 0.95)
    print(f"{'path':32} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'fake upstream directly':32} {d50:8.2f} {d95:8.2f}")
    print(f"{'through the gateway':32} {p50:8.2f} {p95:8.2f}")
    print(f"{'through a bare proxy (reference)':32} {b50:8.2f} {b95:8.2f}")
    print(
        f"a bare proxy's overhead: p50 +{b50 - d50:.2f} ms, p95 +{b95 - d95:.2f} ms (the HTTP stack and the hop alone)"
    )
    print(
        f"gateway overhead: p50 +{p50 - d50:.2f} ms ({p50 / d50:.2f}x), p95 +{p95 - d95:.2f} ms ({p95 / d95:.2f}x); "
        f"mean direct {statistics.mean(direct):.2f} ms over {len(direct)} requests"
    )


@contextmanager
def serving(command: list[str], port: int) -> Iterator[str]:
    """``command`` run as a server on ``port`` (its output dropped) until the block ends; its URL
    once it answers on that port."""
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{' '.join(command)} did not start serving") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def first_requests(urls: list[str], client: httpx.Client) -> list[float]:
    """One request to each of ``urls``, in order, in ms: each server's first (the rounds warm up)."""
    firsts = []
    for url in urls:
        start = time.perf_counter()
        client.post(url + "/v1/chat/completions", json=BODY).raise_for_status()
        firsts.append((time.perf_counter() - start) * 1000)
    return firsts


def deployed() -> tuple[list[float], list[list[float]]]:
    """The rounds with the fake upstream, ``ctxbudget serve`` and the bare proxy each in a
    process of its own (the gateway's store a throwaway file): each server's first request, then
    the rounds (direct, gateway, bare). A server is ready once it answers a GET; the gateway's
    first POST used to build its tokenizer (stop 67: warmed as it starts, see gateway/warmup.py)."""
    here = [sys.executable, str(Path(__file__).resolve()), "--serve"]
    ports = [free_port() for _ in range(3)]
    with (
        tempfile.TemporaryDirectory() as folder,
        serving([*here, "upstream", "--port", str(ports[0])], ports[0]) as upstream,
    ):
        gateway = [sys.executable, "-m", "ctxbudget", "serve", "--port", str(ports[1])]
        gateway += ["--openai-upstream", upstream, "--anthropic-upstream", upstream]
        gateway += ["--store", str(Path(folder) / "bench.db")]
        bare = [*here, "bare", "--upstream", upstream, "--port", str(ports[2])]
        with (
            serving(gateway, ports[1]) as through,
            serving(bare, ports[2]) as barely,
            httpx.Client(timeout=30) as client,
        ):
            urls = [upstream, through, barely]
            return first_requests(urls, client), rounds(urls, client)


def serve(kind: str, port: int, upstream: str) -> None:
    """Serve the fake upstream or the bare proxy on ``port`` until terminated (``--serve``)."""
    import uvicorn

    from ctxbudget.gateway.config import KEEP_ALIVE_SECONDS

    app = FakeUpstream().app if kind == "upstream" else bare_proxy(upstream)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    uvicorn.Server(config).run()


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--serve", choices=["upstream", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:  # one of the servers of the deployed rounds, in its own process
        serve(args.serve, args.port, args.upstream)
        return
    with (
        gateway_and_upstream() as (_, upstream, gateway, client),
        Served(bare_proxy(upstream.url)) as bare,
    ):
        direct, proxied, barely = rounds([upstream.url, gateway.url, bare.url], client)
    print(f"tokenizer: {get_encoding('o200k_base').engine}")
    print("the client, the fake upstream, the gateway and the bare proxy in this process:")
    report(direct, proxied, barely)
    print("each server in a process of its own, as deployed (the gateway: `ctxbudget serve`):")
    firsts, samples = deployed()
    report(*samples)
    print(
        f"first request after start: gateway {firsts[1]:.1f} ms, bare proxy {firsts[2]:.1f} ms, "
        f"fake upstream directly {firsts[0]:.1f} ms (the gateway's p50 after: {percentile(samples[1], 0.5):.2f} ms)"
    )


if __name__ == "__main__":
    main()
