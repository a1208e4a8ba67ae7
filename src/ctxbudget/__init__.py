"""ctxbudget: deterministic, offline context budgeting for LLM requests.

The package root imports only the error tree; every other public name is imported from its module
the first time it is used (``ctxbudget.fit`` loads the fitting pipeline, ``ctxbudget.assemble``
the assembly, the transports the gateway), so ``import ctxbudget`` costs a few milliseconds and
a script pays only for what it calls.
"""

import importlib as _importlib
import typing as _typing

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
    ReplyLeavesNothing,
    StoreError,
    StoreUnavailable,
    SupersedeUnverified,
    UnknownEncodingError,
    UnknownModelError,
    VolatileValueError,
)

if _typing.TYPE_CHECKING:
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
    from .fitting import BudgetSplit, FitReport, FitResult, ItemReport, clear_caches, count, fit
    from .formats.question import render_text as render_question
    from .gateway.transport import AsyncFittingTransport, FittingTransport
    from .session import Session, SQLiteStore, ToolCall, ToolResult, connect_store
    from .tokens import Encoding, TokenCounter, get_encoding, list_encodings, register_encoding
    from .tokens.fast import use_fast_tokenizer, use_fast_tokenizers
    from .trim.passages import PassageScorer

__version__ = "0.1.0"

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
    "ReplyLeavesNothing",
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
    "use_fast_tokenizer",
    "use_fast_tokenizers",
]


# Each public name outside the error tree: (its module, its name there).
_LAZY: dict[str, tuple[str, str]] = {
    "AssemblyReport": (".assembly", "AssemblyReport"),
    "AssemblyResult": (".assembly", "AssemblyResult"),
    "BudgetSplit": (".fitting", "BudgetSplit"),
    "CacheRules": (".catalog.values", "CacheRules"),
    "Catalog": (".catalog.catalog", "Catalog"),
    "Encoding": (".tokens", "Encoding"),
    "FitReport": (".fitting", "FitReport"),
    "FitResult": (".fitting", "FitResult"),
    "ItemReport": (".fitting", "ItemReport"),
    "ModelEncoding": (".catalog.encodings", "ModelEncoding"),
    "ModelSpec": (".catalog.values", "ModelSpec"),
    "PassageScorer": (".trim.passages", "PassageScorer"),
    "Policy": (".assembly", "Policy"),
    "Prices": (".catalog.values", "Prices"),
    "SQLiteStore": (".session", "SQLiteStore"),
    "Session": (".session", "Session"),
    "Tier": (".assembly", "Tier"),
    "TokenCounter": (".tokens", "TokenCounter"),
    "TokenizerSpec": (".catalog.values", "TokenizerSpec"),
    "ToolCall": (".session", "ToolCall"),
    "ToolResult": (".session", "ToolResult"),
    "WindowResolution": (".catalog.values", "WindowResolution"),
    "assemble": (".assembly", "assemble"),
    "clear_caches": (".fitting", "clear_caches"),
    "compare_prefixes": (".assembly", "compare_prefixes"),
    "connect_store": (".session", "connect_store"),
    "count": (".fitting", "count"),
    "count_text": (".catalog.encodings", "count_text"),
    "encoding_for_model": (".catalog.encodings", "encoding_for_model"),
    "fit": (".fitting", "fit"),
    "get_encoding": (".tokens", "get_encoding"),
    "get_policy": (".assembly", "get_policy"),
    "list_encodings": (".tokens", "list_encodings"),
    "list_policies": (".assembly", "list_policies"),
    "load_catalog": (".catalog.catalog", "load_catalog"),
    "load_policy": (".assembly", "load_policy"),
    "register_encoding": (".tokens", "register_encoding"),
    "render_question": (".formats.question", "render_text"),
    "use_fast_tokenizer": (".tokens.fast", "use_fast_tokenizer"),
    "use_fast_tokenizers": (".tokens.fast", "use_fast_tokenizers"),
    "AsyncFittingTransport": (".gateway.transport", "AsyncFittingTransport"),
    "FittingTransport": (".gateway.transport", "FittingTransport"),
}


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def __getattr__(name: str) -> _typing.Any:
    """A public name, imported from its module on first use (then kept in the package)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'ctxbudget' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    try:
        value = getattr(_importlib.import_module(module, __name__), attribute)
    except ImportError as exc:
        if module != ".gateway.transport":
            raise
        raise ImportError(
            f"ctxbudget.{name} needs the gateway extra: pip install 'ctxbudget[gateway]'"
        ) from exc
    globals()[name] = value
    return value
