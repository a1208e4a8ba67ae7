"""ctxbudget: deterministic, offline context budgeting for LLM requests."""

from .budget import BudgetSplit
from .catalog.catalog import Catalog, load_catalog
from .catalog.values import CacheRules, ModelSpec, Prices, TokenizerSpec, WindowResolution
from .errors import (
    BudgetExceeded,
    ConfigError,
    CtxBudgetError,
    InvalidRequestError,
    UnknownEncodingError,
)
from .fitting import FitResult, clear_caches, count, fit
from .formats.question import render_text as render_question
from .report import FitReport, ItemReport
from .tokens import Encoding, TokenCounter, get_encoding, list_encodings, register_encoding

__version__ = "0.1.0"

__all__ = [
    "BudgetExceeded",
    "BudgetSplit",
    "CacheRules",
    "Catalog",
    "ConfigError",
    "CtxBudgetError",
    "Encoding",
    "FitReport",
    "FitResult",
    "InvalidRequestError",
    "ItemReport",
    "ModelSpec",
    "Prices",
    "TokenCounter",
    "TokenizerSpec",
    "UnknownEncodingError",
    "WindowResolution",
    "__version__",
    "clear_caches",
    "count",
    "fit",
    "get_encoding",
    "list_encodings",
    "load_catalog",
    "register_encoding",
    "render_question",
]
