"""ctxbudget: deterministic, offline context budgeting for LLM requests."""

import typing as _typing

from .assembly import (
    AssemblyReport,
    AssemblyResult,
    Policy,
    Tier,
    assemble,
    compare_prefixes,
    get_policy,
    list_policies,
    load_policy,
)
from .catalog.catalog import Catalog, load_catalog
from .catalog.encodings import ModelEncoding, count_text, encoding_for_model
from .catalog.values import CacheRules, ModelSpec, Prices, TokenizerSpec, WindowResolution
from .errors import (
    BudgetExceeded,
    ConfigError,
    CostCeilingExceeded,
    CtxBudgetError,
    InvalidRequestError,
    InvariantViolation,
    PinnedPrefixChanged,
    PrefixChanged,
    PriceUnknown,
    StoreError,
    StoreUnavailable,
    SupersedeUnverified,
    UnknownEncodingError,
    UnknownModelError,
    VolatileValueError,
)
from .fitting import BudgetSplit, FitReport, FitResult, ItemReport, clear_caches, count, fit
from .formats.question import render_text as render_question
from .session import Session, SQLiteStore, ToolCall, ToolResult, connect_store
from .tokens import Encoding, TokenCounter, get_encoding, list_encodings, register_encoding
from .trim.passages import PassageScorer

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:
    from .gateway.transport import AsyncFittingTransport, FittingTransport

__all__ = [
    "AssemblyReport",
    "AssemblyResult",
    "AsyncFittingTransport",
    "BudgetExceeded",
    "BudgetSplit",
    "CacheRules",
    "Catalog",
    "ConfigError",
    "CostCeilingExceeded",
    "CtxBudgetError",
    "Encoding",
    "FitReport",
    "FitResult",
    "FittingTransport",
    "InvalidRequestError",
    "InvariantViolation",
    "ItemReport",
    "ModelEncoding",
    "ModelSpec",
    "PassageScorer",
    "PinnedPrefixChanged",
    "Policy",
    "PrefixChanged",
    "PriceUnknown",
    "Prices",
    "SQLiteStore",
    "Session",
    "StoreError",
    "StoreUnavailable",
    "SupersedeUnverified",
    "Tier",
    "TokenCounter",
    "TokenizerSpec",
    "ToolCall",
    "ToolResult",
    "UnknownEncodingError",
    "UnknownModelError",
    "VolatileValueError",
    "WindowResolution",
    "__version__",
    "assemble",
    "clear_caches",
    "compare_prefixes",
    "connect_store",
    "count",
    "count_text",
    "encoding_for_model",
    "fit",
    "get_encoding",
    "get_policy",
    "list_encodings",
    "list_policies",
    "load_catalog",
    "load_policy",
    "register_encoding",
    "render_question",
]


_LAZY = ("AsyncFittingTransport", "FittingTransport")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def __getattr__(name: str) -> _typing.Any:
    """The in-process transports, imported on first use: they are the gateway's decision path and
    need its extra (httpx, starlette)."""
    if name in _LAZY:
        try:
            from .gateway import transport
        except ImportError as exc:
            raise ImportError(
                f"ctxbudget.{name} needs the gateway extra: pip install 'ctxbudget[gateway]'"
            ) from exc
        return getattr(transport, name)
    raise AttributeError(f"module 'ctxbudget' has no attribute {name!r}")
