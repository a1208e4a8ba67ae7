"""Policy patterns searched over long texts (regexes.TextSearch) and the repeats refused there."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.errors import ConfigError
from ctxbudget.regexes import slow_pattern_hint, text_search

# Patterns that open with an unbounded repeat of one class (the ones TextSearch reads a run at a
# time), some inside groups or under flags, and some it leaves to finditer.
_PATTERNS = [
    r"\S+@",
    r"[^\s@]+@[^\s@]+\.[a-z]+",
    r"\w+\.\w+",
    r"(\w+)@(\w+)",
    r"(?:\d+)-x",
    r"(?i)[a-c]+B",
    r"a*b",
    r"a+?b",
    r"a++b",
    r"[^b]+b",
    r".+\n",
    r"(?s).+b",
    r"\d{2,}\.",
    r"(a+)\1",  # refers back: left to finditer
    r"a+b|c",  # alternatives at the top: left to finditer
    r"(?x) a+ b",
    r"\W+\w",
    r"(?<=a)a+b",
    r"(?#c)(?i)\w+@",  # a global flag after a comment, or a verbose blank: left to finditer
    r"(?x) (?i)\w+@",
]


@pytest.mark.parametrize("pattern", _PATTERNS)
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="aabbc@. \n-12AB_é", max_size=60))
def test_a_text_search_finds_what_finditer_finds(pattern: str, text: str) -> None:
    expected = [(m.span(), m.groups()) for m in re.finditer(pattern, text)]
    assert [(m.span(), m.groups()) for m in text_search(pattern).finditer(text)] == expected


@pytest.mark.parametrize(
    ("pattern", "reads_runs"),
    [
        (r"\S+@", True),
        (r"(\w+)@", True),
        (r"(?i)[a-z]+@", True),
        (r"(a+)\1", False),
        (r"a+b|c", False),
        (r"x\w+", False),
        (r"(?i:a+)b", False),
    ],
)
def test_which_patterns_are_read_a_run_at_a_time(pattern: str, reads_runs: bool) -> None:
    assert (text_search(pattern).run_start is not None) is reads_runs


@pytest.mark.parametrize(
    "text",
    ["@" + "a" * 3000, "a" * 1500 + "@" + "a" * 1500, "a" * 3000 + " @", "ab@" * 1000, "xY9+/" * 600],
)
def test_long_runs_without_the_separator_give_finditers_matches(text: str) -> None:
    """The texts on which CPython's search of these patterns is quadratic (51 kB of them: 4-11 s)."""
    for pattern in (r"\S+@", r"[^\s@]+@[^\s@]+\.[a-z]+", r"\w+\.\w+"):
        assert [m.span() for m in text_search(pattern).finditer(text)] == [
            m.span() for m in re.finditer(pattern, text)
        ]


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        (r"\S+@\S+\.\S+", True),  # 5 s on a 51 kB run of "ab@"
        (r"\S+:\S+:\S+Z", True),
        (r"\d+.{1,2}\d+.{1,2}\d+x", True),  # 149 s
        (r"[^\s@]+@[^\s@]+\.[a-z]+", False),
        (r"\d+-\d+", False),
        (r"\w+\.\w+", False),
        (r"[A-Z]{2,}-\d+", False),
        # optional parts, assertions and alternatives beside the separator join the repeats too
        (r"\S+ ?: ?\S+ ?: ?\S+Z", True),  # 1.2 s on 2,000 characters
        (r"\S+ ?= ?\S+;", True),
        (r"\S+(?:at|@)\S+\.[a-z]+", True),
        (r"\S+\b@\S+\.x", True),
        (r"\S+@\S+$", True),  # an assertion can fail
        # nothing that can fail after the pair: the first split tried matches
        (r"\S+@\S+", False),
        (r"[\w.+-]+@[\w.-]+\.[\w.-]+", False),
        (r".+:.+", False),
    ],
)
def test_repeats_a_separator_joins_are_refused_for_long_texts(pattern: str, refused: bool) -> None:
    assert (slow_pattern_hint(pattern, long_texts=True) is not None) is refused
    # a catalog's match rule reads a model id of at most 256 characters: kept there
    assert slow_pattern_hint(pattern) is None


def test_a_policy_with_a_volatile_pattern_a_separator_joins_is_refused() -> None:
    from ctxbudget.assembly._policy import parse_policy

    text = (
        'name = "p"\nenvelope_tokens = 1000\n[[tiers]]\nname = "t"\nceiling_tokens = 500\n'
        'eviction = "never"\n[volatile]\npatterns = [{kind = "email", regex = \'\\S+@\\S+\\.\\S+\'}]\n'
    )
    with pytest.raises(ConfigError, match=r"leave the separator out of the repeats"):
        parse_policy(text, "p.toml")


def test_a_slow_pattern_is_refused_before_anything_runs_it() -> None:
    """The check that a pattern matches no empty text ran it on a 55-character probe first:
    (.*){1,10}z took 52 s there before the policy was refused for it (12: over a minute)."""
    from ctxbudget.assembly._policy import parse_policy

    text = (
        'name = "p"\nenvelope_tokens = 1000\n[[tiers]]\nname = "t"\nceiling_tokens = 500\n'
        "eviction = \"never\"\n[volatile]\nallow = ['(.*){1,14}z']\n"
    )
    with pytest.raises(ConfigError, match=r"unbounded repeat inside a counted one"):
        parse_policy(text, "p.toml")
