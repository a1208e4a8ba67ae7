"""The assembly pipeline: items in priority tiers (pinned, protected, compactable, rolling, the
ledger, the current turn) assembled into one cache-friendly request under a policy, with every
decision in an :class:`AssemblyReport`.

Modules in the order an :func:`assemble` call goes through them:

- ``_assemble``: the entry point; checks the options and the model's window, builds the setup.
- ``_request`` (the items file, or a provider body, parsed), ``_policy`` (tiers and ceilings).
- ``_pinned``: no volatile value in a pinned tier's items (INV-CTX-01, on the input).
- ``_current_turn`` (Block 4 bounded; Block 3, the ledger, by ``_tiers``), then ``_previous``
  (the previous turn's report read, its live cache prefixes).
- ``_envelope``: drafts (``_draft``: selection per tier in ``_tiers``, with ``_quotes`` for
  superseding citations; blocks laid out; rendered by ``_render``) shrunk to the envelope.
- ``_pricing``: breakpoints, the cache prediction and the cost, under the cost ceiling.
- ``_pinned`` again: the pinned prefix against the previous turn's (INV-CTX-01).
- ``_reporting``: the :class:`AssemblyReport` (values in ``_report``).
- ``_carried``: a chat body's own fields (tools, tool_choice, ...) carried into its assembled
  body, their tokens counted and priced.

``_prefix`` compares two rendered requests' cached prefixes outside a call (:func:`compare_prefixes`).
"""

from ._assemble import AssemblyResult, assemble, check_envelope, within_output_cap
from ._carried import thinking_within
from ._pinned import check_pinned_items
from ._policy import CompactionRules, Policy, Tier, get_policy, list_policies, load_policy, parse_policy
from ._prefix import cached_prefix, compare_prefixes
from ._render import OutputFormat, block_texts
from ._report import AssemblyReport, BlockReport, BreakpointReport, CacheReport, DecisionReport, TierReport
from ._request import parse_context_request

__all__ = [
    "AssemblyReport",
    "AssemblyResult",
    "BlockReport",
    "BreakpointReport",
    "CacheReport",
    "CompactionRules",
    "DecisionReport",
    "OutputFormat",
    "Policy",
    "Tier",
    "TierReport",
    "assemble",
    "block_texts",
    "cached_prefix",
    "check_envelope",
    "check_pinned_items",
    "compare_prefixes",
    "get_policy",
    "list_policies",
    "load_policy",
    "parse_context_request",
    "parse_policy",
    "thinking_within",
    "within_output_cap",
]
