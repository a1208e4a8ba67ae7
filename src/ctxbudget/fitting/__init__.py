"""The fit pipeline: one request (Anthropic, OpenAI or a question with documents) cut to fit a
model's window, component by component, with every decision in a :class:`FitReport`.

Modules in the order a call goes through them: ``_fit`` (options, memo, the entry points), ``_budget``
(component budgets), the shared algorithms in :mod:`ctxbudget.trim`, then ``_report``.
"""

from ._budget import BudgetSplit, parse_budget_spec
from ._fit import BODY_OUTPUT_FIELDS, FitResult, clear_caches, count, fit
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
