"""ctxbudget: deterministic, offline context budgeting for LLM requests."""

from .assemble import AssemblyResult, assemble
from .budget import BudgetSplit
from .catalog.catalog import Catalog, load_catalog
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
    SupersedeUnverified,
    UnknownEncodingError,
    UnknownModelError,
    VolatileValueError,
)
from .fitting import FitResult, clear_caches, count, fit
from .formats.question import render_text as render_question
from .policy import Policy, Tier, get_policy, list_policies, load_policy
from .prefix import compare_prefixes
from .report import AssemblyReport, FitReport, ItemReport
from .session import Session, SQLiteStore, ToolCall, ToolResult
from .tokens import Encoding, TokenCounter, get_encoding, list_encodings, register_encoding

__version__ = "0.1.0"

__all__ = [
    "AssemblyReport",
    "AssemblyResult",
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
    "InvalidRequestError",
    "InvariantViolation",
    "ItemReport",
    "ModelSpec",
    "PinnedPrefixChanged",
    "Policy",
    "PrefixChanged",
    "PriceUnknown",
    "Prices",
    "SQLiteStore",
    "Session",
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
    "count",
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
