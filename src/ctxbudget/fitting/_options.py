"""The options of one fit and the checks at its door: every option and the request body are
checked here, so that a bad one is a :class:`ConfigError` or an :class:`InvalidRequestError`
naming it, before anything is counted.

:class:`FitOptions` is the frozen, hashable image of what the caller asked (a part of the memo's
key); :class:`FitSetup` adds what was resolved from it (the catalog, the window, the scorer).
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..catalog.catalog import Catalog, catalog_of, check_safety_factor
from ..catalog.values import WindowResolution
from ..errors import ConfigError, InvalidRequestError
from ..formats import BODY_OUTPUT_FIELDS
from ..formats.jsonvalue import JsonShape, check_json_value, json_kind, json_shown
from ..items import HistoryCut
from ._memo import thaw

if TYPE_CHECKING:  # types only: a count imports no trimming strategy
    from ..trim.documents import OutputOrder, ScoreOrder
    from ..trim.passages import PassageScorer

__all__ = [
    "BODY_OUTPUT_FIELDS",
    "FitOptions",
    "FitSetup",
    "OnOverflow",
    "above_output_cap",
    "body_reserve",
    "body_reserve_field",
    "catalog_of",
    "check_options",
    "check_request",
    "input_format_of",
    "within_output_cap",
]

OnOverflow = Literal["error", "empty"]

_CHOICES = {
    "on_overflow": ("error", "empty"),
    "score_order": ("desc", "asc"),
    "document_order": ("ranked", "original"),
}


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """How one fit is made: frozen and hashable, so it is part of the memo's key as it is. The
    budget's values are kept in their frozen image (:func:`ctxbudget.fitting._memo.freeze`)."""

    model: str
    max_context_tokens: int = 0
    reserve_output_tokens: int | None = None
    # where the reserve came from, for errors: the option, the body's field ("$.max_tokens"), or
    # "" for the default
    reserve_source: str = "reserve_output_tokens="
    budget: tuple[tuple[str, Hashable], ...] = ()
    input_format: str | None = None
    on_overflow: OnOverflow = "error"
    score_order: ScoreOrder = "desc"
    document_order: OutputOrder = "ranked"
    split_documents: bool = False
    safety_factor: float | None = None
    count_all: bool = False
    low_water: float | None = None
    previous_cut: HistoryCut | None = None
    cache_breakpoints: bool = False

    def budget_mapping(self) -> dict[str, Any] | None:
        """The budget as given (None when none was)."""
        return {k: thaw(v) for k, v in self.budget} or None


@dataclass(frozen=True)
class FitSetup:
    """A checked fit before it starts: its options, the catalog and the window it resolved, and
    the caller's passage scorer (not part of the options: it may be unhashable)."""

    options: FitOptions
    catalog: Catalog
    resolution: WindowResolution
    passage_scorer: PassageScorer | None = None


def check_options(**options: Any) -> None:
    """The options' types and values, so that a bad one is a ConfigError naming it."""
    for name, allowed in _CHOICES.items():
        if options[name] not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {options[name]!r}")
    if options["safety_factor"] is not None:
        check_safety_factor(options["safety_factor"])
    reserve = options["reserve_output_tokens"]
    if reserve is not None and (isinstance(reserve, bool) or not isinstance(reserve, int)):
        raise ConfigError(f"reserve_output_tokens must be a whole number of tokens or None, got {reserve!r}")
    budget = options["budget"]
    if budget is not None and (
        not isinstance(budget, Mapping) or not all(isinstance(k, str) for k in budget)
    ):
        raise ConfigError(f"budget must map component names to percentages, got {budget!r:.80}")
    _check_percentages(budget)
    scorer = options["passage_scorer"]
    if scorer is not None and not callable(scorer):
        raise ConfigError(
            f"passage_scorer must be callable (query, passages) -> scores, got {type(scorer).__name__}"
        )
    for flag in ("count_all", "cache_breakpoints", "split_documents"):
        if not isinstance(options[flag], bool):
            raise ConfigError(f"{flag} must be True or False, got {options[flag]!r}")
    if scorer is not None and not options["split_documents"]:
        raise ConfigError("passage_scorer is used only when split_documents=True; set both or neither")


def _check_percentages(budget: Mapping[str, Any] | None) -> None:
    """Each share is a real number (an int, a float, numpy's, a Fraction): a numeric string was read as its number (``"10"``:
    10%, in silence) and a boolean as 0% with a warning; both are the caller's type error. A
    number out of 0..100, or NaN, is still clamped with a warning (``BudgetSplit``)."""
    for name, value in (budget or {}).items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy and Fraction too
            raise ConfigError(f"budget[{name!r}] must be a number (a percent, 0 to 100), got {value!r:.40}")


def check_steps(low_water: Any, previous_cut: Any) -> HistoryCut | None:
    """``low_water``: a share of the history's budget, above 0 and at most 1 (or None: no steps);
    ``previous_cut``: a previous report's ``history_cut`` (a :class:`HistoryCut` or its dict),
    given only with ``low_water``. Returns the cut."""
    if low_water is not None and (
        isinstance(low_water, bool) or not isinstance(low_water, int | float) or not 0 < low_water <= 1
    ):
        raise ConfigError(
            f"low_water must be a share of the history budget, above 0 and at most 1, got {low_water!r}"
        )
    cut = HistoryCut.of(previous_cut)
    if previous_cut is not None and cut is None:
        raise ConfigError(
            "previous_cut must be a report's history_cut ({'index': int, 'sha256': str}, and with a "
            f"'budget', a whole number of tokens > 0, its 'query', a str), got {previous_cut!r:.80}"
        )
    if cut is not None and low_water is None:
        raise ConfigError(
            "previous_cut is used only with low_water= (cutting the history in steps); set both"
        )
    return cut


def input_format_of(input_format: str | None, former: str | None) -> str | None:
    """``input_format``, or ``format`` (its former name); both given must agree. None or an
    empty name: detected from the body."""
    for name, value in (("input_format", input_format), ("format", former)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a format name, got {type(value).__name__}")
    if former and input_format and former != input_format:
        raise ConfigError(f"input_format={input_format!r} and format={former!r} disagree; give one")
    return input_format or former or None


def check_chat_model(resolution: WindowResolution) -> None:
    """Refuse a model whose requests are not chat bodies: an embeddings body ``{"model",
    "input"}`` reads as a Responses one, and was counted with chat framing and called exact."""
    spec = resolution.spec
    if spec is not None and spec.kind == "embedding":
        raise ConfigError(
            f"{spec.id} is an embedding model: fit and count read chat requests; count an "
            f"embedding input's text with count_text(text, model={spec.id!r})"
        )


def check_request(request: object) -> JsonShape:
    """The request body is a JSON object of JSON values (an :class:`InvalidRequestError` if not);
    returns what the check saw of it (the fit memo keys plain bodies by their JSON text)."""
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"the request body must be a JSON object, got {json_kind(request)}")
    return check_json_value(request if type(request) is dict else dict(request))


def body_reserve(request: Mapping[str, Any]) -> int | None:
    """The reply size the body asks for (Anthropic ``max_tokens``, OpenAI ``max_completion_tokens``
    or ``max_tokens``, Responses ``max_output_tokens``): the default output reserve."""
    return body_reserve_field(request)[0]


def body_reserve_field(request: Mapping[str, Any]) -> tuple[int | None, str]:
    """:func:`body_reserve` and the JSON path it was read from (``""`` when the body has none).
    A body that gives two of the fields (``max_tokens`` and ``max_completion_tokens``) is read at
    the larger: a server may honour either, and the reply is reserved and priced at the most it
    can be (reading the first, a ceiling was checked at 10 tokens of a 100,000-token reply)."""
    found: tuple[int | None, str] = (None, "")
    for name in BODY_OUTPUT_FIELDS:
        value = request.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidRequestError(
                f"must be a whole number of tokens >= 0, got {json_shown(value)}", f"$.{name}"
            )
        if found[0] is None or value > found[0]:
            found = (value, f"$.{name}")
    return found


def above_output_cap(resolution: WindowResolution, reserve: int, source: str) -> str:
    """A warning when the body asks for a longer reply (``source``: its field) than the model's
    output cap: the provider refuses such a request, however well its input fits. ("" when not;
    a reserve given as an option is a budget, not what is sent.)"""
    cap = within_output_cap(resolution, reserve, source)
    if cap == reserve:
        return ""
    model = resolution.catalog_id or "the model"
    return (
        f"{source} asks for {reserve:,} reply tokens, above {model}'s output limit of {cap:,}: "
        f"the provider refuses the request unless the field is lowered (or the catalog's limit is out of date); "
        f"the prompt is budgeted with {cap:,} for the reply, all the model can write"
    )


def within_output_cap(resolution: WindowResolution, reserve: int, source: str) -> int:
    """The reply reserve a body asks for (``source``: its field), held to the model's output cap:
    the model writes no more, and a ``max_tokens`` of 199,000 for a 64,000-token model cut a
    143,000-token prompt to 994 tokens that the provider refused all the same
    (:func:`above_output_cap` warns). A reserve given as an option is a budget: it stands."""
    cap = resolution.spec.max_output_tokens if resolution.spec else None
    return cap if cap is not None and reserve > cap and source.startswith("$.") else reserve
