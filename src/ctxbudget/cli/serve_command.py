"""The gateway command: serve."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

import click

from ..assembly import load_policy
from ..trim.steps import DEFAULT_LOW_WATER
from .base import (
    CATALOG_OPTION,
    EXIT_USAGE,
    SERVE_FLAGS,
    STORE_OPTION,
    USD,
    FiniteRange,
    fail,
    main,
    run_action,
    unknown_model_option,
)

if TYPE_CHECKING:
    from ..gateway import GatewayConfig


@main.command("serve")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default)."
)
@click.option(
    "--port", default=8787, show_default=True, type=click.IntRange(1, 65535), help="TCP port to listen on."
)
@click.option(
    "--policy",
    "policy_ref",
    default=None,
    metavar="NAME|FILE",
    help="Assemble every chat request with this tiered policy instead of fitting it: the body's "
    "system, messages and tool groups are mapped onto the policy's tiers (tool calls and results "
    "kept whole in the rolling tier), every other field is kept, and the policy's cost ceiling "
    "applies (docs/gateway.md).",
)
@click.option(
    "--allow-policy",
    "allowed_policies",
    multiple=True,
    metavar="NAME|FILE",
    help="A policy clients may pick per request with X-Ctxbudget-Policy (repeatable).",
)
@click.option(
    "--max-context-tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Budget every request to N tokens (0: the model's window; never above it). Clients may "
    "lower it per request with X-Ctxbudget-Max-Context-Tokens.",
)
@click.option(
    "--cost-ceiling",
    type=USD,
    metavar="USD",
    help="Refuse requests estimated above this cost (overrides --policy's).",
)
@STORE_OPTION
@click.option(
    "--anthropic-upstream",
    default="https://api.anthropic.com",
    show_default=True,
    envvar="CTXBUDGET_ANTHROPIC_UPSTREAM",
    metavar="URL",
    help="The Anthropic base URL, with or without /v1 (fixed; never taken from a request) "
    "(env CTXBUDGET_ANTHROPIC_UPSTREAM).",
)
@click.option(
    "--openai-upstream",
    default="https://api.openai.com",
    show_default=True,
    envvar="CTXBUDGET_OPENAI_UPSTREAM",
    metavar="URL",
    help="The OpenAI base URL as OPENAI_BASE_URL takes it: with or without /v1, or with another "
    "path holding the version (.../v1beta/openai/) (env CTXBUDGET_OPENAI_UPSTREAM).",
)
@click.option(
    "--max-body-bytes",
    default=8 * 1024 * 1024,  # GatewayConfig.max_body_bytes (the gateway is imported only to serve)
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request body read; a larger one is refused (413) before it is read whole. "
    "Anthropic takes up to 32 MB (large images, PDFs); a fit holds 4-60x a body's bytes.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    default=600.0,
    show_default=True,
    type=FiniteRange(min=0.1),
    help="Upstream timeout in seconds.",
)
@click.option(
    "--count-with-upstream",
    is_flag=True,
    help="For Claude, ask the provider's count_tokens endpoint (with the client's key) when the "
    "estimate's safety margin alone decides whether a request is cut; answers are remembered by "
    "content and any failure falls back to the estimate.",
)
@click.option(
    "--store-fail-open",
    is_flag=True,
    help="When the session store cannot take a turn, send and answer anyway (the turn is logged "
    "and counted, not stored). By default the client gets a 503 and nothing is sent while the "
    "store fails (docs/deploy.md).",
)
@click.option(
    "--no-conversation-cache",
    "no_conversation_cache",
    is_flag=True,
    help="Fit mode: do not cut histories in steps nor add rolling cache breakpoints (only a "
    "long Anthropic system prompt is marked); see docs/caching.md.",
)
@click.option(
    "--low-water",
    type=FiniteRange(min=0.05, max=1.0),
    default=DEFAULT_LOW_WATER,
    show_default="2/3",
    help="Fit mode: a history over its budget is cut back to this share of it, and the cut is "
    "held while what follows fits (docs/caching.md).",
)
@click.option(
    "--pass-through",
    is_flag=True,
    help="Send any other /v1/ path (models, embeddings, files, batches, a background response's "
    "retrieval) to the upstream as it came: not fitted, priced or recorded, so no cost ceiling "
    "reaches it. Off: those paths are a 404 (docs/gateway.md).",
)
@click.option(
    "--fast-tokenizer",
    "fast_tokenizer",
    is_flag=True,
    help="Encode o200k_base and cl100k_base with quicktok (installed with the gateway extra): "
    "the same token ids in about a third of tiktoken's time on large bodies, for about 1 s and "
    "117 MB at start-up. Off: tiktoken, and a first answer within 1 s of the start.",
)
@CATALOG_OPTION
@unknown_model_option("refuse the request (400 unknown_model, naming the closest ids)")
def serve_command(
    host: str,
    port: int,
    policy_ref: str | None,
    cost_ceiling: float | None,
    store_path: str,
    anthropic_upstream: str,
    openai_upstream: str,
    max_body_bytes: int,
    timeout_seconds: float,
    catalogs: tuple[str, ...],
    unknown_model: str,
    allowed_policies: tuple[str, ...],
    max_context_tokens: int,
    count_with_upstream: bool,
    store_fail_open: bool,
    no_conversation_cache: bool,
    low_water: float,
    pass_through: bool,
    fast_tokenizer: bool,
) -> None:
    """Serve the Anthropic- and OpenAI-compatible gateway: point an SDK's base URL at it."""
    _without_httpx_cli()
    try:
        import uvicorn  # noqa: F401 - present, or the extra is missing: checked before serving

        from ..gateway import GatewayConfig
    except ImportError:
        fail(
            "the gateway needs its extra: pip install 'ctxbudget[gateway]' "
            "(in a source checkout: pip install -e '.[gateway]')",
            EXIT_USAGE,
        )

    def action() -> None:
        config = GatewayConfig(
            host=host,
            port=port,
            anthropic_upstream=anthropic_upstream,
            openai_upstream=openai_upstream,
            store_path=store_path,
            cost_ceiling_usd=_ceiling(cost_ceiling, policy_ref),
            max_body_bytes=max_body_bytes,
            timeout_seconds=timeout_seconds,
            catalog_paths=catalogs,
            unknown_model=unknown_model,  # type: ignore[arg-type]
            policy=policy_ref,
            allowed_policies=allowed_policies,
            max_context_tokens=max_context_tokens,
            count_with_upstream=count_with_upstream,
            store_fail_open=store_fail_open,
            conversation_cache=not no_conversation_cache,
            low_water=low_water,
            pass_through=pass_through,
            fast_tokenizer=fast_tokenizer,
        )
        _serve(config)

    run_action(action, SERVE_FLAGS, output=False)


def _without_httpx_cli() -> None:
    """Keep httpx's command-line client out of the worker. ``import httpx`` imports it
    (``httpx._main``: rich's console, progress and syntax, pygments' lexers), 50-70 ms of a
    worker's start measured here, for a client the gateway never runs. Marked absent before
    httpx is first imported, the import takes httpx's own fallback for a missing CLI, and
    ``httpx.main`` only says so (upstream made the import lazy: pydantic/httpx2#947)."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def _ceiling(given: float | None, policy_ref: str | None) -> float | None:
    """``--cost-ceiling``, else the policy's ceiling, else none."""
    if given is not None:
        return given
    return load_policy(policy_ref).cost_ceiling_usd if policy_ref else None


def configure_logging() -> None:
    """INFO lines to stderr: the gateway's own (one a request, never keys or bodies); the HTTP
    client's only from WARNING up, as its INFO line holds each upstream URL with its query
    string, where some clients put their key (``?api-key=...``)."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _serve(config: GatewayConfig) -> None:
    """Run the gateway until it is stopped, logging to stderr."""
    import uvicorn

    from ..gateway import create_app
    from ..gateway.config import KEEP_ALIVE_SECONDS

    configure_logging()
    if config.fast_tokenizer:  # loaded and checked before the banner: a failure is one line, exit 2
        from ..tokens.fast import use_fast_tokenizers

        use_fast_tokenizers(required=True)
    # opens the store: a store that cannot serve fails here, before the banner; the process is the
    # server's own, so what start-up leaves alive is frozen out of the collector's passes
    app = create_app(config, freeze_heap=True)
    listening = _listening(config.host, config.port)
    click.echo(
        f"ctxbudget gateway on http://{config.host}:{config.port} -> "
        f"anthropic {config.anthropic_upstream}, openai {config.openai_upstream}"
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS))
    server.run(sockets=listening)


def _listening(host: str, port: int) -> list[socket.socket]:
    """The gateway's sockets, one for each address ``host`` resolves to (``localhost``: its IPv4
    and IPv6 addresses, as uvicorn binds them), bound before the banner: a port in use, or a host
    this machine cannot resolve or does not have, is one line and exit 2 (uvicorn printed its own
    error after the banner, and exited 3)."""
    sockets: list[socket.socket] = []
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(found):
            listening = socket.socket(family, kind, proto)
            sockets.append(listening)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # its own address only: the IPv4 one has its socket
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listening.bind(address)
            listening.listen(2048)
    except OSError as exc:
        for opened in sockets:
            opened.close()
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host, --port)", EXIT_USAGE)
    return sockets
