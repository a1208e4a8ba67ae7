"""The fit pipeline: one request (Anthropic, OpenAI or a question with documents) cut to fit a
model's window, component by component, with every decision in a :class:`FitReport`.

Modules in the order a ``fit`` call goes through them:

- ``_fit``: the entry points (``fit``, ``count``) and the memo of whole fits;
- ``_options``: the options and the request checked, frozen into ``FitOptions`` / ``FitSetup``;
- ``_context``: the room (window less the reply) and the request parsed and measured once;
- ``_verify``: when it does not fit, the pool allocated, planned, applied and verified by count;
- ``_budget``: the component percentages and their allocation of the pool;
- ``_plan``: each item's decision within its budget (strategies in :mod:`ctxbudget.trim`);
- ``_report``: the report built from the context and the outcome.

``_memo`` holds the frozen images the memo and the options keep.
"""

from ._budget import BudgetSplit, parse_budget_spec
from ._fit import FitResult, clear_caches, count, fit
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
