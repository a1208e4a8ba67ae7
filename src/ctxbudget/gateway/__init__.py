"""The HTTP gateway: an Anthropic- and OpenAI-compatible proxy that fits every request.

Its modules, by role: ``routes`` (the ASGI app and its thin handlers) and ``answers`` (responses
in the provider's shape) over ``service`` (:class:`~.service.Gateway`, what the handlers ask of
it), which holds ``preparing`` (fit or assemble, ceilings), ``recording`` (stored turns, metrics,
calibration) and ``upstream`` (the HTTP client to the providers and their exact counts);
``refusals`` holds the one table from library errors to HTTP status and error code per provider.
"""

from .config import GatewayConfig
from .routes import create_app

__all__ = ["GatewayConfig", "create_app"]
