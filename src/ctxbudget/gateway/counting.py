"""Exact counts for Claude from the provider's token-counting endpoint, asked only when a fit
decision depends on the estimate (``serve --count-with-upstream``; off by default).

No local tokenizer exists for Claude 3+, so the gateway counts with a proxy encoding times a
safety factor. When a request fits without the factor but not with it, the factor alone decides
whether it is cut: then the gateway asks ``POST /v1/messages/count_tokens`` with the client's own
credentials, remembers the answer by the content's sha256, and refits with the exact figure. Any
failure (an error status, a timeout, an answer without ``input_tokens``) falls back to the estimate.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

__all__ = ["COUNTED_FIELDS", "UpstreamCounter"]

logger = logging.getLogger(__name__)
# The fields of a Messages body that count_tokens reads (it refuses the others, such as max_tokens).
COUNTED_FIELDS = ("model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")


class UpstreamCounter:
    """Exact input-token counts from the upstream, remembered by content (at most ``limit``)."""

    def __init__(self, client: httpx.AsyncClient, url: str, limit: int = 4096) -> None:
        self.client = client
        self.url = url
        self.limit = limit
        self.asked = 0
        self.failed = 0
        self._known: OrderedDict[str, int] = OrderedDict()

    async def count(
        self, body: Mapping[str, Any], headers: Sequence[tuple[str, str]], proxy_tokens: int
    ) -> int | None:
        """The upstream's count of ``body``'s input, or None when it cannot be had. An answer
        far from the proxy count (below half of it, above four times it) is not a count of this
        body: it is neither used nor remembered."""
        payload = {k: body[k] for k in COUNTED_FIELDS if k in body}
        key = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        if key in self._known:
            self._known.move_to_end(key)
            return self._known[key]
        self.asked += 1
        try:
            response = await self.client.post(self.url, json=payload, headers=list(headers))
            tokens = response.json().get("input_tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            logger.warning("count_tokens upstream failed (%s); the estimate stands", type(exc).__name__)
            tokens = None
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            self.failed += 1
            return None
        if not proxy_tokens / 2 <= tokens <= proxy_tokens * 4:
            self.failed += 1
            return None
        self._known[key] = tokens
        while len(self._known) > self.limit:
            self._known.popitem(last=False)
        return tokens
