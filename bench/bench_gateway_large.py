"""Gateway overhead on large bodies, against one tokenization pass of the body's text (same run).

Time: an OpenAI chat body whose user message holds a 100,000-token document, sent through the
gateway and to the fake upstream directly, alternating, after a warm-up; once under a window
where it fits (passed through whole), once under a 50,000-token budget (trimmed). The overhead
(gateway minus direct) is printed next to the floor, ``encode_ordinary`` of the body's text
measured in the same loop, and the target: 1.2x the floor + 3 ms.

Memory: a fresh subprocess sends a 1,000,000-token body through the gateway's ASGI app (upstream
answered in-process without parsing the body), trimmed and whole, and reports tracemalloc's peak
above what existed before the request (cyclic garbage collected first), as a multiple of the
body's UTF-8 size (target: 5x).

The gateway counts as ``ctxbudget serve --fast-tokenizer`` does, with quicktok when it is
installed (loaded before anything is timed); ``--tiktoken`` measures it as ``serve`` counts by
default, with tiktoken alone. The floor is tiktoken's pass either way. Either way the app imports
numpy as it is made, when installed, as ``serve``'s does (token lengths and passage scores are
read with it).

    python bench/bench_gateway_large.py [ROUNDS] [--tiktoken]
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_gateway import gateway_and_upstream
from benchcli import bench_parser
from documents import document

from ctxbudget import get_encoding
from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.tokens.fast import use_fast_tokenizers


def body_for(text: str, model: str = "gpt-4o") -> dict[str, Any]:
    """An OpenAI chat body: a short system prompt, the document and a question as the user turn."""
    return {
        "model": model,
        "max_tokens": 500,
        "messages": [
            {"role": "system", "content": "Answer from the document only."},
            {"role": "user", "content": text + "\n\nWhen was notice of the defect given?"},
        ],
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_post(client: httpx.Client, url: str, content: bytes, headers: dict[str, str]) -> float:
    start = time.perf_counter()
    response = client.post(url + "/v1/chat/completions", content=content, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return elapsed


def measure(rounds: int, text: str, fast_tokenizer: bool) -> tuple[dict[str, dict[str, list[float]]], str]:
    """Per case, the direct and proxied times and the floor, alternating, in ms; and the engine
    that counted (read while the gateway runs: it is set back to tiktoken after)."""
    tk = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    cases = {"fits (passed through)": {}, "trimmed to 50,000": {"x-ctxbudget-max-context-tokens": "50000"}}
    out: dict[str, dict[str, list[float]]] = {c: {"direct": [], "gateway": [], "floor": []} for c in cases}
    with gateway_and_upstream(timeout=120, fast_tokenizer=fast_tokenizer) as (
        fake,
        upstream,
        gateway,
        client,
    ):
        engine = str(get_encoding("o200k_base").engine)  # type: ignore[attr-defined]
        for n in range(rounds + 3):
            for case, extra in cases.items():
                # a new body each time: the fit's memo of a body it saw is not what is measured
                content = json.dumps(body_for(f"Copy {n} of {case}.\n\n{text}")).encode("utf-8")
                headers = {
                    "content-type": "application/json",
                    "x-ctxbudget-session": f"big-{n % 4}",
                    **extra,
                }
                direct = timed_post(client, upstream.url, content, headers)
                proxied = timed_post(client, gateway.url, content, headers)
                start = time.perf_counter()
                tk.encode_ordinary(text)
                floor = (time.perf_counter() - start) * 1000
                fake.received.clear()
                if n >= 3:
                    for key, value in (("direct", direct), ("gateway", proxied), ("floor", floor)):
                        out[case][key].append(value)
    return out, engine


def report(results: dict[str, dict[str, list[float]]], engine: str, tokens: int, size: int) -> None:
    print(f"body: {tokens:,} tokens of document, {size:,} bytes of JSON; the gateway counts with {engine}")
    print(
        f"{'case':24} {'floor p50':>9} {'direct p95':>10} {'gateway p95':>11} {'overhead p95':>12} {'target':>8}"
    )
    for case, series in results.items():
        pairs = [g - d for g, d in zip(series["gateway"], series["direct"], strict=True)]
        floor = statistics.median(series["floor"])
        overhead = percentile(series["gateway"], 0.95) - percentile(series["direct"], 0.95)
        target = 1.2 * floor + 3
        print(
            f"{case:24} {floor:9.1f} {percentile(series['direct'], 0.95):10.1f} "
            f"{percentile(series['gateway'], 0.95):11.1f} {overhead:12.1f} {target:8.1f}  "
            f"(paired overhead p50 {statistics.median(pairs):.1f}, p95 {percentile(pairs, 0.95):.1f}; "
            f"overhead p95 = {(overhead - 3) / floor:.2f}x floor + 3 ms)"
        )


class CannedUpstream(httpx.AsyncBaseTransport):
    """An upstream that reads the request and answers a fixed chat completion (no parse: the
    memory measured is the gateway's)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        async for _ in request.stream:  # type: ignore[union-attr]
            pass
        answer = {
            "id": "c",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return httpx.Response(200, json=answer)


async def through_app(app: Any, content: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """One request through the ASGI app, the body given in 64 KiB chunks as a server would; its status.
    (Once the body is read, ``receive`` waits as a server's does until the client leaves: it
    answered an empty body again and again, and the gateway's watch for a client that leaves
    spun on it for good.)"""
    chunks = [content[i : i + 65536] for i in range(0, len(content), 65536)] or [b""]
    status = 0

    async def receive() -> dict[str, Any]:
        if not chunks:  # the body read whole: a server's receive waits for the client to leave
            await asyncio.Event().wait()
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        status = message.get("status", status)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    await app(scope, receive, send)
    return status


def memory(text: str, fast_tokenizer: bool) -> None:
    """Peak memory of 1,000,000-token requests through the gateway, over the body's UTF-8 size."""
    import tracemalloc

    if fast_tokenizer:
        use_fast_tokenizers()  # as `ctxbudget serve --fast-tokenizer` does at start-up

    content = json.dumps(body_for(text, "gpt-4.1")).encode("utf-8")  # a 1,047,576-token window
    cases = {
        "fits (passed through)": [],
        "trimmed to 200,000": [(b"x-ctxbudget-max-context-tokens", b"200000")],
    }
    with tempfile.TemporaryDirectory() as folder:
        config = GatewayConfig(
            openai_upstream="http://upstream.invalid", store_path=str(Path(folder) / "m.db")
        )
        app = create_app(config, transport=CannedUpstream())
        asyncio.run(through_app(app, json.dumps(body_for("warm up")).encode(), []))
        tracemalloc.start()
        for case, headers in cases.items():
            gc.collect()  # the last case's cyclic garbage is not "what existed before": freed
            # during this request, it hid up to 5 MB of its peak
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            status = asyncio.run(through_app(app, content, headers))
            peak = tracemalloc.get_traced_memory()[1] - before
            print(
                f"1,000,000-token body, {case}: status {status}, peak {peak / 2**20:.1f} MiB over the request "
                f"= {peak / len(content):.2f}x its {len(content) / 2**20:.1f} MiB (target 5x)"
            )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("rounds", nargs="?", type=int, default=30, help="timed rounds (default 30)")
    parser.add_argument(
        "--tiktoken", action="store_true", help="count with tiktoken, as `serve` does by default"
    )
    parser.add_argument(
        "--memory", action="store_true", help="the memory figures alone (the child the bench starts)"
    )
    args = parser.parse_args()
    fast, rounds = not args.tiktoken, args.rounds
    if args.memory:
        memory(document(1_000_000), fast)
        return
    text = document(100_000)
    tokens = len(get_encoding("o200k_base").tiktoken.encode_ordinary(text))  # type: ignore[attr-defined]
    size = len(json.dumps(body_for(text)).encode("utf-8"))
    report(*measure(rounds, text, fast), tokens, size)
    script = str(Path(__file__).resolve())
    subprocess.run([sys.executable, script, "--memory", *([] if fast else ["--tiktoken"])], check=True)


if __name__ == "__main__":
    main()
