"""The fit pipeline: one request (Anthropic, OpenAI or a question with documents) cut to fit a
model's window, component by component, with every decision in a :class:`FitReport`.

Modules in the order a ``fit`` call goes through them:

- ``_fit``: the entry point ``fit`` and the memo of whole fits (``_count``: ``count``, which
  needs none of the stages below but the options);
- ``_options``: the options and the request checked, frozen into ``FitOptions`` / ``FitSetup``;
- ``_context``: the room (window less the reply) and the request parsed and measured once;
- ``_verify``: when it does not fit, the pool allocated, planned, applied and verified by count;
- ``_budget``: the component percentages and their allocation of the pool;
- ``_plan``: each item's decision within its budget (strategies in :mod:`ctxbudget.trim`);
- ``_report``: the report built from the context and the outcome.

``_memo`` holds the frozen images the memo and the options keep. Each public name is imported
from its module on first use, so a count loads no trimming strategy.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._budget import BudgetSplit, parse_budget_spec
    from ._count import count
    from ._fit import FitResult, clear_caches, fit
    from ._options import BODY_OUTPUT_FIELDS
    from ._report import FitReport, ItemReport

__all__ = [
    "BODY_OUTPUT_FIELDS",
    "BudgetSplit",
    "FitReport",
    "FitResult",
    "ItemReport",
    "clear_caches",
    "count",
    "fit",
    "parse_budget_spec",
]

# Each name from its module on first use: ``count`` needs none of the trimming pipeline.
_LAZY = {
    "BODY_OUTPUT_FIELDS": "._options",
    "BudgetSplit": "._budget",
    "FitReport": "._report",
    "FitResult": "._fit",
    "ItemReport": "._report",
    "clear_caches": "._fit",
    "count": "._count",
    "fit": "._fit",
    "parse_budget_spec": "._budget",
}


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def __getattr__(name: str) -> _typing.Any:
    """A public name, imported from its module on first use (then kept in the package)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
