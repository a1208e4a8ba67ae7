"""The HTTP gateway: an Anthropic- and OpenAI-compatible proxy that fits every request."""

from .config import GatewayConfig
from .routes import create_app

__all__ = ["GatewayConfig", "create_app"]
