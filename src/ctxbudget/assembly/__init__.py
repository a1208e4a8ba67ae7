"""The assembly pipeline: items in priority tiers (pinned, protected, compactable, rolling, the
ledger, the current turn) assembled into one cache-friendly request under a policy, with every
decision in an :class:`AssemblyReport`.

Modules in the order a call goes through them: ``_request`` (the items file), ``_policy``,
``_tiers`` (selection per tier), ``_current_turn`` (Block 4), ``_assemble`` (the envelope loop,
pricing, the pinned-prefix check), ``_render`` (blocks to a provider body), ``_report``.
"""

from ._assemble import AssemblyResult, assemble
from ._policy import CompactionRules, Policy, Tier, get_policy, list_policies, load_policy, parse_policy
from ._prefix import compare_prefixes
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
    "compare_prefixes",
    "get_policy",
    "list_policies",
    "load_policy",
    "parse_context_request",
    "parse_policy",
]
