"""Counting texts together with tiktoken, and reading a compact tier's sentences while they are
counted: the same counts and profiles as one text at a time, only made sooner."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import VolatileValueError, assemble, clear_caches, get_encoding, get_policy
from ctxbudget.simulation.deposition import build_legal_context
from ctxbudget.tokens import crew
from ctxbudget.tokens.bundled import load_bundled_encoding
from ctxbudget.tokens.counter import TokenCounter, analyze, cached_analysis, count_ahead, count_together
from ctxbudget.tokens.encoding import JOINED_CHARS, JOINER, TiktokenEncoding, TokenIds
from ctxbudget.tokens.small import SMALL_TOTAL_CHARS
from ctxbudget.trim.extract import extract_ahead, extract_sentences
from ctxbudget.trim.profile import read_ahead, sentence_profiles

BUNDLED = ("o200k_base", "cl100k_base")
# What sits at the split patterns' edges, and special-token text on either side of a joiner.
PIECES = [
    *"aZ9 '\n\r\t.,!?-/<>|日한😀\u0301\u00a0\u2028",
    "'s",
    "  ",
    "\n\n",
    "<|",
    "|>",
    "<|endoftext",
    "endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|>",
    "\ud800",  # a lone surrogate: tiktoken replaces it, alone or joined
]
TEXTS = st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), max_size=8)


@pytest.fixture(autouse=True)
def cold() -> Iterator[None]:
    clear_caches()
    yield
    clear_caches()


def _built(name: str) -> TiktokenEncoding:
    encoding = get_encoding(name)
    assert isinstance(encoding, TiktokenEncoding)
    encoding.tiktoken.encode_ordinary("built")  # type: ignore[attr-defined]
    return encoding


def _alone(encoding: TiktokenEncoding, text: str) -> bytes:
    tk = encoding.tiktoken
    return bytes(len(tk.decode_single_token_bytes(i)) for i in tk.encode_ordinary(text))


@pytest.mark.parametrize("name", BUNDLED)
@settings(max_examples=150, deadline=None)
@given(texts=TEXTS)
def test_texts_counted_together_are_counted_as_each_alone(name: str, texts: list[str]) -> None:
    encoding = _built(name)
    found = encoding.token_lengths_each(texts)
    assert found is not None and len(found) == len(texts)
    for text, lengths in zip(texts, found, strict=True):
        assert lengths == (None if JOINER in text else _alone(encoding, text))


@pytest.mark.parametrize("name", BUNDLED)
def test_a_text_holding_the_joiner_or_a_blank_run_is_left_to_be_counted_alone(name: str) -> None:
    encoding = _built(name)
    blank = "x" + " " * 400_001 + "y"  # tiktoken's check refuses it, with its error, when alone
    texts = ["before", f"a{JOINER}b", blank, "after", JOINER]
    found = encoding.token_lengths_each(texts)
    assert found == [_alone(encoding, "before"), None, None, _alone(encoding, "after"), None]
    assert encoding.token_lengths_each([JOINER]) == [None]


def test_a_table_with_a_token_of_no_bytes_splits_the_joined_ids_at_the_joiner_itself() -> None:
    """The texts of one call are told apart by the joiner's length, 0: a table that gives a real
    token 0 too (no bundled one does) must not end a text at that token."""
    built = _built("o200k_base")
    tk = built.tiktoken
    rank = tk.encode_single_token(" the")
    table = bytearray(built.byte_lengths)
    table[rank] = 0
    encoding = TiktokenEncoding(tk, bytes(table), bundled=True)
    texts = ["Of the lease.", "", "the end of the term", "No article."]
    expected = [bytes(table[i] for i in tk.encode_ordinary(t)) for t in texts]
    assert encoding.token_lengths_each(texts) == expected
    assert built.token_lengths_each(texts) == [_alone(built, t) for t in texts]


def test_texts_past_one_calls_characters_are_counted_in_several_calls_or_alone() -> None:
    encoding = _built("o200k_base")
    page = "Q. Did you see the pump fail? A. Yes, twice, in May. " * 400
    longest = "The valve held. " * (JOINED_CHARS // 16 + 10)  # over one call's characters: alone
    texts = [page] * (JOINED_CHARS // len(page)) + ["Last page.", longest, "After it."]
    assert sum(map(len, texts)) > 1.9 * JOINED_CHARS
    found = encoding.token_lengths_each(texts)
    assert found == [_alone(encoding, t) for t in texts]


@pytest.mark.parametrize("name", BUNDLED)
def test_the_joiner_is_a_special_token_that_no_match_can_reach_past(name: str) -> None:
    """What the joined count rests on: tiktoken splits the text at the joiner alone, so no other
    special token may hold it, and no end of it may be its start (a match begun in a text would
    run into the joiner)."""
    specials = _built(name).tiktoken.special_tokens_set  # type: ignore[attr-defined]
    assert JOINER in specials
    assert not [s for s in specials if s != JOINER and JOINER in s]
    assert not [k for k in range(1, len(JOINER)) if JOINER[:k] == JOINER[-k:]]


def test_an_encoding_not_yet_built_is_not_built_for_texts_the_small_path_takes() -> None:
    encoding = load_bundled_encoding("o200k_base")
    assert encoding.token_lengths_each(["Asked and answered."] * 10) is None
    many = ["Asked and answered. " * 100] * (SMALL_TOTAL_CHARS // 2000 + 1)
    found = encoding.token_lengths_each(many)
    assert found is not None and set(found) == {_alone(_built("o200k_base"), many[0])}


def test_counting_ahead_with_tiktoken_caches_each_texts_own_count() -> None:
    encoding = _built("o200k_base")
    pages = [
        f"Page {n}. The witness was shown Exhibit {n} and said she had not seen it. " * 60 for n in range(30)
    ]
    blank = "x" + " " * 400_001 + "y"
    count_ahead(encoding, [*pages, blank]).wait()
    for page in pages:
        found = cached_analysis(encoding, page)
        assert found is not None and found.lengths == _alone(encoding, page)
    assert cached_analysis(encoding, blank) is None
    kept = ["Asked and answered.", "Objection.", ""]
    count_together(encoding, kept)
    assert [cached_analysis(encoding, t) is not None for t in kept] == [True, True, False]


def test_sentences_read_ahead_make_the_same_profiles() -> None:
    texts = [
        "The witness paused. She said no. Dr. Smith agreed at 3 p.m. on Jan. 5th.",
        "Überprüfung läuft. Das Gericht tagt! 日本語の文。次の文。",
        "a" * 3000 + " tail without an end",
        "",
    ]
    plain = sentence_profiles("o200k_base", texts)
    clear_caches()
    asked = itertools.count()
    read_ahead("o200k_base", texts, lambda: next(asked) < 2)  # stops when told to
    assert next(asked) == 3  # asked before each text until it said no
    assert sentence_profiles("o200k_base", texts) == plain
    clear_caches()
    read_ahead("o200k_base", texts, lambda: True)
    assert sentence_profiles("o200k_base", texts) == plain


def test_the_legal_assembly_counted_ahead_by_tiktoken_is_the_same_request() -> None:
    """The legal example is counted ahead (over 64,000 characters) while its sentences are read:
    the body and report are those of an assembly whose counts were all cached first, one text
    at a time."""
    request = build_legal_context()
    policy = get_policy("legal-review")
    ahead = assemble(request, policy=policy, model="claude-sonnet-4-5")
    clear_caches()
    encoding = _built("o200k_base")
    for item in request["items"]:
        analyze(encoding, item["text"])
    counted = assemble(request, policy=policy, model="claude-sonnet-4-5")
    assert ahead.report.to_dict() == counted.report.to_dict()
    assert ahead.request == counted.request


SOURCES = [
    "The witness paused. She said no. Dr. Smith agreed at 3 p.m. on Jan. 5th. The pump failed twice.",
    "",
    "Überprüfung läuft. Die Pumpe fiel aus! 日本語の文。pump 次の文。",
    "Nothing here. The valve held. The pump was replaced in May; the valve was not.",
]


@pytest.mark.parametrize("stop_after", [0, 2, 3, 99])
def test_an_extraction_read_ahead_is_the_extraction(stop_after: int) -> None:
    """Read and scored ahead, in full or stopped after some texts, the extraction is the same."""
    counter = TokenCounter(get_encoding("o200k_base"), exact=True)
    plain = extract_sentences(SOURCES, 40, "pump failure valve", counter, [3, 3, 3, 3])
    clear_caches()
    asked = itertools.count()
    extract_ahead("o200k_base", SOURCES, "pump failure valve", lambda: next(asked) < stop_after)
    assert extract_sentences(SOURCES, 40, "pump failure valve", counter, [3, 3, 3, 3]) == plain
    assert plain.sentences_kept > 0


class _Held(TiktokenEncoding):
    """The bundled o200k_base, whose texts counted together wait until ``go`` is set."""

    def __init__(self) -> None:
        built = _built("o200k_base")
        super().__init__(built.tiktoken, built.byte_lengths, proven_boundaries=True, bundled=True)
        self.go = threading.Event()

    def measured_each(
        self, texts: Sequence[str], *, ends: bool = False
    ) -> list[bytes | TokenIds | None] | None:
        # what the thread counting ahead calls (held in a method it no longer called, the thread
        # raced the test's first look at it, and won under load)
        assert self.go.wait(10)
        return super().measured_each(texts, ends=ends)


def test_an_abandoned_count_returns_at_once_and_keeps_nothing() -> None:
    encoding = _Held()
    pages = [f"Page {n}: the pump failed in May and the valve held. " * 100 for n in range(20)]
    ahead = count_ahead(encoding, pages)
    assert ahead.running()
    ahead.abandon()  # returns while the thread still waits
    assert not ahead.running()
    encoding.go.set()
    assert crew.settled(10)
    assert [cached_analysis(encoding, page) for page in pages] == [None] * len(pages)
    ahead = count_ahead(encoding, pages)  # not abandoned: kept
    ahead.wait()
    assert all(cached_analysis(encoding, page) is not None for page in pages)


def test_a_request_refused_by_a_check_keeps_no_count_made_ahead() -> None:
    request = build_legal_context()
    playbook = request["items"][0]
    request["items"][0] = {**playbook, "text": "Updated 2026-09-16. " + playbook["text"]}
    with pytest.raises(VolatileValueError, match="2026-09-16"):
        assemble(request, policy="legal-review", model="claude-sonnet-4-5")
    assert crew.settled(10)
    encoding = get_encoding("o200k_base")
    assert [cached_analysis(encoding, item["text"]) for item in request["items"][1:]] == [None] * (
        len(request["items"]) - 1
    )


_FORKED = """
import os, signal
from ctxbudget import get_encoding
from ctxbudget.tokens.counter import cached_analysis, clear_count_cache, count_ahead

encoding = get_encoding("o200k_base")
text = "The valve held and the pump failed. " * 30_000  # long: its halves encoded on two threads
pages = [f"Page {n}: the pump failed in May. " * 200 for n in range(12)]
expected = encoding.encode(text)
count_ahead(encoding, pages).wait()
pid = os.fork()
if pid == 0:  # the child: the parent's threads are not in it
    signal.alarm(30)
    clear_count_cache()
    count_ahead(encoding, pages).wait()
    counted = all(cached_analysis(encoding, p) is not None for p in pages)
    os._exit(0 if encoding.encode(text) == expected and counted else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_counts_a_long_text_and_ahead() -> None:
    """A child forked after the parent's threads counted: the pools the parent made name threads
    the child does not have; a long text's halves and a count ahead were queued for them for
    ever (the child is killed by its alarm then: -14)."""
    done = subprocess.run([sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_counts_ahead_one_after_another_run_on_the_threads_kept() -> None:
    """A new thread encodes more slowly (its allocator's arena is new): sequential counts reuse at
    most KEPT threads, where each count had a new thread."""
    used: list[int] = []
    for _ in range(3 * crew.KEPT):
        future = crew.start(lambda: used.append(threading.get_ident()))
        assert future is not None
        future.result(10)
    assert crew.settled(10)
    assert len(used) == 3 * crew.KEPT
    assert len(set(used)) <= crew.KEPT


def test_counts_ahead_past_the_kept_threads_get_threads_of_their_own() -> None:
    """More counts at once than threads kept all run at once (none waits for a kept thread)."""
    together = threading.Barrier(crew.KEPT + 3)  # every job and this test
    used: list[int] = []

    def job() -> None:
        used.append(threading.get_ident())
        together.wait(10)

    futures = [crew.start(job) for _ in range(crew.KEPT + 2)]
    assert not crew.settled(0)
    together.wait(10)  # broken (an error) if a job were queued behind another
    for future in futures:
        assert future is not None
        future.result(10)
    assert crew.settled(10)
    assert len(set(used)) == crew.KEPT + 2


def test_a_job_whose_thread_could_not_start_is_never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool queues a job before it starts the thread that fails: the next thread it starts
    finds the job there, and must not run it (its caller counted without it)."""
    fresh = crew._Crew()
    ran: list[str] = []

    class NoThread(threading.Thread):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading, "Thread", NoThread)
        assert fresh.start(lambda: ran.append("dropped")) is None
    assert fresh.settled(0)
    later = fresh.start(lambda: ran.append("later"))
    assert later is not None
    later.result(10)
    assert fresh.settled(10)
    assert ran == ["later"]
