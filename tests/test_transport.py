"""The in-process transports: the official SDKs fitted with no server, by the gateway's own decision
path (the same bytes upstream as through the gateway), refusals in the provider's shape with
nothing sent, other requests passed through."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

import ctxbudget
from ctxbudget.gateway.bodies import encoded

from .fake_upstream import FAKE_MODELS, FakeUpstream, Served, gateway_over_fake, unmarked

HISTORY = [
    message
    for n in range(40)
    for message in (
        {"role": "user", "content": f"question {n}: " + "what did the witness say about the notice? " * 30},
        {"role": "assistant", "content": f"answer {n}: " + "the witness said notice was given late. " * 30},
    )
]
ASK = [*HISTORY, {"role": "user", "content": "So when was notice given?"}]


def _transport(**options: Any) -> ctxbudget.FittingTransport:
    return ctxbudget.FittingTransport(catalog_paths=(str(FAKE_MODELS),), **options)


def _claude(url: str, transport: ctxbudget.FittingTransport) -> anthropic.Anthropic:
    """The Anthropic SDK fitted in process, talking to ``url``."""
    return anthropic.Anthropic(
        base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def _gpt(url: str, transport: ctxbudget.FittingTransport) -> openai.OpenAI:
    """The OpenAI SDK fitted in process, talking to ``url``."""
    return openai.OpenAI(
        base_url=url + "/v1", api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def test_an_anthropic_client_is_fitted_in_process_and_told_what_was_done() -> None:
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        transport = _transport(max_context_tokens=4000)
        client = _claude(upstream.url, transport)
        raw = client.messages.with_raw_response.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=ASK
        )
        reply = raw.parse()
    sent = unmarked(fake.received[-1]["messages"])
    assert reply.content[0].text == "echo: So when was notice given?"  # type: ignore[union-attr]
    assert raw.headers["x-ctxbudget-trimmed"] == "true"
    assert (
        int(raw.headers["x-ctxbudget-tokens-after"]) <= 4000 < int(raw.headers["x-ctxbudget-tokens-before"])
    )
    assert sent[-1] == ASK[-1] and len(sent) < len(ASK)
    assert transport.last_report is not None and transport.last_report["tokens_after"] <= 4000


def test_the_transport_sends_the_bytes_the_gateway_sends(tmp_path: Path) -> None:
    """One decision path: the same request, fitted by the gateway and by the transport, reaches
    the upstream as the same body, and the client is told the same figures."""
    body = {"model": "gpt-4o", "max_tokens": 100, "messages": ASK}
    headers = {"x-ctxbudget-max-context-tokens": "3000", "x-ctxbudget-session": "same"}
    with gateway_over_fake(tmp_path / "g.db") as (fake, url):
        through_gateway = httpx.post(url + "/v1/chat/completions", json=body, headers=headers)
        fake_url = fake.gateway.config.openai_upstream
        with httpx.Client(transport=_transport()) as client:
            in_process = client.post(fake_url + "/v1/chat/completions", json=body, headers=headers)
    assert fake.received[-1] == fake.received[-2]
    for header in ("x-ctxbudget-tokens-before", "x-ctxbudget-tokens-after", "x-ctxbudget-trimmed"):
        assert through_gateway.headers[header] == in_process.headers[header]


def test_a_body_the_transport_passes_through_is_sent_as_the_callers_bytes() -> None:
    """The transport wrote every body's JSON again, twice (once to decide, once to send); a body
    that fits is sent as the client library wrote it, and a trimmed one as the gateway writes it."""
    fake = FakeUpstream()
    given = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "When?"}]}'
    long = json.dumps({"model": "gpt-4o", "max_tokens": 100, "messages": ASK}).encode()
    with Served(fake.app) as upstream, httpx.Client(transport=_transport(max_context_tokens=3000)) as client:
        for content in (given, long):
            client.post(upstream.url + "/v1/chat/completions", content=content).raise_for_status()
    assert fake.raw[0] == given
    assert fake.raw[1] == encoded(fake.received[1]) and len(fake.received[1]["messages"]) < len(ASK)


def test_a_transport_closed_with_its_client_serves_the_next_client() -> None:
    """httpx's own transports open new connections after a close; a client's close closes its
    transport, and a second client over the same FittingTransport had every fitted request fail
    on a closed store (those passed through went on)."""
    fake = FakeUpstream()
    transport = _transport(max_context_tokens=3000)
    with Served(fake.app) as upstream:
        with _gpt(upstream.url, transport) as first:
            first.chat.completions.create(model="gpt-4o", max_tokens=100, messages=ASK)  # type: ignore[arg-type]
        told = transport.last_report
        with _gpt(upstream.url, transport) as second:
            assert transport.last_report == told  # still the last request's, until the next one
            raw = second.chat.completions.with_raw_response.create(
                model="gpt-4o",
                max_tokens=100,
                messages=ASK,  # type: ignore[arg-type]
            )
    assert raw.http_response.status_code == 200 and raw.headers["x-ctxbudget-trimmed"] == "true"
    assert len(fake.received) == 2 and fake.received[0] == fake.received[1]


def test_an_async_transport_closed_with_its_client_serves_the_next_client() -> None:
    fake = FakeUpstream()
    transport = ctxbudget.AsyncFittingTransport(catalog_paths=(str(FAKE_MODELS),), max_context_tokens=3000)

    async def twice(url: str) -> list[int]:
        statuses = []
        for _ in range(2):
            async with httpx2.AsyncClient(transport=transport) as client:
                body = {"model": "gpt-4o", "max_tokens": 100, "messages": ASK}
                answer = await client.post(url + "/v1/chat/completions", json=body)
                statuses.append(answer.status_code)
        return statuses

    with Served(fake.app) as upstream:
        assert asyncio.run(twice(upstream.url)) == [200, 200]
    assert len(fake.received) == 2 and len(fake.received[1]["messages"]) < len(ASK)


def test_a_refusal_is_the_providers_error_and_nothing_is_sent() -> None:
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        client = _gpt(upstream.url, _transport(max_context_tokens=500))
        too_long = [{"role": "system", "content": "Be exact. " * 2000}, {"role": "user", "content": "Why?"}]
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="gpt-4o", max_tokens=50, messages=too_long)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError, match="ceiling"):
            priced = _gpt(upstream.url, _transport(cost_ceiling_usd=0.000001))
            priced.chat.completions.create(model="gpt-4o", max_tokens=50, messages=ASK)  # type: ignore[arg-type]
    assert refused.value.code == "context_length_exceeded"
    assert fake.received == []


def test_other_requests_pass_through_untouched() -> None:
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        client = _claude(upstream.url, _transport(max_context_tokens=1000))
        counted = client.messages.count_tokens(model="claude-sonnet-4-6", messages=ASK)  # type: ignore[arg-type]
    assert fake.counted and fake.counted[-1]["messages"] == ASK  # not fitted: the client asked for a count
    assert counted.input_tokens > 1000


def test_the_transports_own_headers_are_not_sent_on_with_what_passes_through() -> None:
    """A client's default X-Ctxbudget-* headers went on to every request passed through (models,
    embeddings, files, an Azure deployment's chat), where the gateway drops them: never sent on."""
    fake = FakeUpstream()
    own = {"X-Ctxbudget-Session": "mine", "X-Ctxbudget-Max-Context-Tokens": "1000", "X-Other": "kept"}
    with Served(fake.app) as upstream:
        client = openai.OpenAI(
            base_url=upstream.url + "/v1",
            api_key="k",
            max_retries=0,
            default_headers=own,
            http_client=httpx2.Client(transport=_transport()),
        )
        client.models.list()
        client.embeddings.create(model="text-embedding-3-small", input="hi")
        azure = openai.AzureOpenAI(
            azure_endpoint=upstream.url,
            api_key="k",
            api_version="2024-10-21",
            azure_deployment="dep",
            max_retries=0,
            default_headers=own,
            http_client=httpx2.Client(transport=_transport()),
        )
        azure.chat.completions.create(model="gpt-4o", messages=ASK[-1:])  # type: ignore[arg-type]

        async def embed() -> None:
            transport = ctxbudget.AsyncFittingTransport()
            async with openai.AsyncOpenAI(
                base_url=upstream.url + "/v1",
                api_key="k",
                default_headers=own,
                http_client=httpx2.AsyncClient(transport=transport),
            ) as client:
                await client.embeddings.create(model="text-embedding-3-small", input="hi")

        asyncio.run(embed())
    assert len(fake.headers) == 4
    for headers in fake.headers:
        assert headers["x-other"] == "kept" and not any(k.startswith("x-ctxbudget") for k in headers)


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions"])
@pytest.mark.parametrize("ours", [{}, {"X-Ctxbudget-Session": "mine"}])
def test_a_header_value_that_is_not_ascii_is_sent_on_as_its_bytes(path: str, ours: dict[str, str]) -> None:
    """``X-Title: Café`` (OpenRouter's app title) went on as it came only when nothing was taken
    out: a request re-made without the transport's own headers, or fitted, re-encoded every
    header as ASCII text (UnicodeEncodeError)."""
    seen: list[list[tuple[bytes, bytes]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.raw)
        return httpx.Response(200, json={"data": []})

    transport = ctxbudget.FittingTransport(transport=httpx.MockTransport(answer))
    with httpx.Client(transport=transport, base_url="https://api.openai.com") as client:
        headers = {**ours, "X-Title": "Café".encode()}
        if path == "/v1/models":
            client.get(path, headers=headers)
        else:
            client.post(path, headers=headers, json={"model": "gpt-4o", "messages": ASK[-1:]})
    assert (b"X-Title", "Café".encode()) in seen[0]
    assert not any(k.lower().startswith(b"x-ctxbudget") for k, _ in seen[0])


def _counted_inner_transports(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The inner transports the fitting transport builds from now on (httpx2's, counted)."""
    built: list[object] = []

    class Counted(httpx2.HTTPTransport):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(httpx2, "HTTPTransport", Counted)
    return built


def test_the_inner_transport_is_built_once_and_its_connections_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # A new inner transport (its pool, its SSL context) was built for every request and dropped.
    built = _counted_inner_transports(monkeypatch)
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        client = _claude(upstream.url, _transport(max_context_tokens=1000))
        for _ in range(3):
            client.messages.count_tokens(model="claude-sonnet-4-6", messages=ASK[-1:])  # type: ignore[arg-type]
            client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=ASK[-1:])  # type: ignore[arg-type]
    assert len(built) == 1


def test_threads_sending_their_first_requests_at_once_share_one_inner_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 threads of one client, each with its first request: 16 inner transports were built, 15
    of them (their pools, their connections) never closed."""
    built = _counted_inner_transports(monkeypatch)
    fake = FakeUpstream()
    start = threading.Barrier(16)
    with Served(fake.app) as upstream, httpx2.Client(transport=_transport()) as client:

        def first() -> None:
            start.wait()
            client.get(upstream.url + "/v1/models")

        threads = [threading.Thread(target=first) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(fake.paths) == 16 and len(built) == 1


def test_an_async_openai_client_streams_through_the_async_transport() -> None:
    fake = FakeUpstream()

    async def run(url: str) -> tuple[str, int]:
        transport = ctxbudget.AsyncFittingTransport(max_context_tokens=3000)
        client = openai.AsyncOpenAI(
            base_url=url + "/v1",
            api_key="k",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=transport),
        )
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-4o",
                max_tokens=100,
                stream=True,
                messages=ASK,  # type: ignore[arg-type]
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            response = await client.responses.create(model="gpt-4o", max_output_tokens=100, input=ASK)  # type: ignore[arg-type]
        assert transport.last_report is not None
        return text + "|" + response.output_text, int(transport.last_report["tokens_after"])

    with Served(fake.app) as upstream:
        text, after = asyncio.run(run(upstream.url))
    assert text.startswith("echo") and "|echo" in text and after <= 3000
    assert len(fake.received[0]["messages"]) < len(ASK) and len(fake.received[1]["input"]) < len(ASK)
    assert "stream_options" not in fake.received[0]  # the client gets the stream it asked for


def test_a_responses_refusal_names_the_bodys_own_field() -> None:
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        client = _gpt(upstream.url, _transport(max_context_tokens=3000))
        with pytest.raises(openai.BadRequestError, match=r"\(\$\.max_output_tokens\) leaves nothing"):
            client.responses.create(model="gpt-4o", max_output_tokens=5000, input="hi")
    assert fake.received == []


def test_a_refusal_advises_the_transports_own_options() -> None:
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        client = _claude(upstream.url, _transport())
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(model="claude-foo-9", max_tokens=10, messages=ASK)
    message = refused.value.message
    assert "FittingTransport(catalog_paths=[FILE])" in message and 'unknown_model="floor"' in message
    assert "serve --" not in message
    policy = {"X-Ctxbudget-Policy": "legal-review"}  # policies are the server's: said so, not its flag alone
    with Served(fake.app) as upstream, pytest.raises(anthropic.BadRequestError) as refused:
        _claude(upstream.url, _transport()).messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=ASK, extra_headers=policy
        )
    assert (
        "a FittingTransport fits requests" in refused.value.message
        and "(serve --" not in refused.value.message
    )


def test_a_cost_refusal_names_the_transports_ceiling_and_paths_may_be_path_objects() -> None:
    """The refusal said the header "may only lower the server's"; a Path was not "a file path"."""
    fake = FakeUpstream()
    transport = ctxbudget.FittingTransport(catalog_paths=(FAKE_MODELS,), cost_ceiling_usd=0.000001)
    with Served(fake.app) as upstream, pytest.raises(openai.BadRequestError) as refused:
        _gpt(upstream.url, transport).chat.completions.create(model="gpt-4o", messages=ASK)
    message = refused.value.message
    assert "may only lower FittingTransport(cost_ceiling_usd=)" in message and "server" not in message


@pytest.mark.parametrize(
    "options",
    [
        {"cost_ceiling_usd": float("nan")},  # compared False with every cost: no ceiling at all
        {"cost_ceiling_usd": -5},
        {"cost_ceiling_usd": "abc"},
        {"max_context_tokens": -1},
        {"max_context_tokens": True},
        {"unknown_model": "bogus"},
        {"catalog_paths": "mine.toml"},  # read a character at a time
    ],
)
def test_the_transports_options_are_checked_when_it_is_built(options: dict[str, Any]) -> None:
    with pytest.raises(ctxbudget.ConfigError, match=next(iter(options))):
        ctxbudget.FittingTransport(**options)


def test_a_transport_to_send_through_is_checked() -> None:
    with pytest.raises(ctxbudget.ConfigError, match=r"one with handle_request\(\), got str"):
        ctxbudget.FittingTransport(transport="http://127.0.0.1:9")
    with pytest.raises(ctxbudget.ConfigError, match=r"one with handle_async_request\(\)"):
        ctxbudget.AsyncFittingTransport(transport=httpx.HTTPTransport())  # a sync one
    # one library's transport under the other's client: a bare AssertionError inside the client
    mixed = httpx2.Client(transport=ctxbudget.FittingTransport(transport=httpx.HTTPTransport()))
    with pytest.raises(ctxbudget.ConfigError, match=r"an httpx transport, but the client .* an httpx2 one"):
        mixed.get("http://127.0.0.1:9/v1/models")


def test_a_compressed_body_is_refused_as_the_served_gateway_refuses_it() -> None:
    """The transport read a gzip body as text ("invalid_json ... not UTF-8 text at byte 1"), where
    `ctxbudget serve` answers 415 unsupported_content_encoding: one decision path, one answer."""
    import gzip
    import json

    fake = FakeUpstream()
    body = gzip.compress(json.dumps({"model": "gpt-4o", "messages": ASK[-1:]}).encode())
    with Served(fake.app) as upstream, httpx.Client(transport=_transport()) as client:
        refused = client.post(
            upstream.url + "/v1/chat/completions",
            content=body,
            headers={"content-encoding": "gzip", "content-type": "application/json"},
        )
    assert refused.status_code == 415 and refused.json()["error"]["code"] == "unsupported_content_encoding"
    assert fake.received == []


def test_the_last_reports_warnings_name_the_transports_options() -> None:
    """An unknown id's warning said "set max_context_tokens= or add the model with
    catalog=load_catalog(FILE)": the library's arguments, not the transport's."""
    fake = FakeUpstream()
    transport = _transport(unknown_model="floor")
    with Served(fake.app) as upstream:
        _gpt(upstream.url, transport).chat.completions.create(
            model="house-llm-1", messages=[{"role": "user", "content": "hi"}]
        )
    warnings = " ".join((transport.last_report or {})["warnings"])
    assert "FittingTransport(catalog_paths=[FILE])" in warnings and "load_catalog" not in warnings


def test_the_answers_warnings_header_names_the_transports_options() -> None:
    fake = FakeUpstream()
    transport = _transport(unknown_model="floor")
    with Served(fake.app) as upstream:
        raw = _gpt(upstream.url, transport).chat.completions.with_raw_response.create(
            model="house-llm-1", messages=[{"role": "user", "content": "hi"}]
        )
    told = raw.headers["x-ctxbudget-warnings"]
    assert "house-llm-1" in told and "FittingTransport(catalog_paths=[FILE])" in told
    assert "load_catalog" not in told and "--catalog" not in told


def test_a_sessions_history_cut_is_held_from_turn_to_turn_as_through_the_gateway() -> None:
    """The transport stores nothing, and it remembered nothing either: each turn cut the history
    afresh (the cut moved every turn, so no cached prefix was ever read again: a predicted read of
    0 on every turn), where the gateway holds its cut."""
    fake = FakeUpstream()
    transport = _transport()
    cuts: list[int | None] = []
    reads: list[int] = []
    with Served(fake.app) as upstream:
        client = _claude(upstream.url, transport)
        messages: list[dict[str, Any]] = []
        for n in range(12):
            messages.append(
                {"role": "user", "content": f"Question {n}: " + "what did the witness say? " * 150}
            )
            raw = client.messages.with_raw_response.create(
                model="claude-sonnet-4-6",
                max_tokens=512,
                system="You are careful. " * 300,
                messages=messages,
                extra_headers={"X-Ctxbudget-Session": "held", "X-Ctxbudget-Max-Context-Tokens": "12000"},
            )
            cut = (transport.last_report or {}).get("history_cut")
            cuts.append(cut["index"] if cut else None)
            reads.append(int(raw.headers["x-ctxbudget-cache-read-predicted"]))
            messages.append({"role": "assistant", "content": "The witness said so. " * 80})
    made = [c for c in cuts if c is not None]
    assert len(made) >= 6 and len(set(made)) < len(made) / 2  # held over several turns, cut in steps
    assert sum(r > 0 for r in reads[1:]) >= len(reads) // 2
