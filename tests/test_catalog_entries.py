"""The catalog's models are built from their entries only when read (catalog.entries)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbudget.catalog.bundled import (
    EntryHead,
    LazyEntries,
    entry_heads,
    index_of,
    read_bundled,
    read_document,
)
from ctxbudget.catalog.catalog import Catalog, bundled_document, bundled_text
from ctxbudget.catalog.entries import ModelEntries, SpecsById
from ctxbudget.catalog.files import build_catalog
from ctxbudget.catalog.values import NO_CACHE, ModelSpec, TokenizerSpec
from ctxbudget.errors import ConfigError

TOKENIZER = TokenizerSpec(encoding="o200k_base", exact=True, safety_factor=1.0)


def _spec(provider: str, model_id: str, window: int = 1000) -> ModelSpec:
    return ModelSpec(
        id=model_id,
        provider=provider,
        kind="chat",
        context_window=window,
        max_output_tokens=None,
        tokenizer=TOKENIZER,
        prices=None,
        cache=NO_CACHE,
    )


class _Counting:
    """A builder that records which positions it was asked to build."""

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        self.keys = keys
        self.built: list[int] = []

    def __call__(self, position: int) -> ModelSpec:
        self.built.append(position)
        provider, model_id = self.keys[position]
        return _spec(provider, model_id, 1000 + position)


def _entries(keys: list[tuple[str, str]]) -> tuple[ModelEntries, _Counting]:
    builder = _Counting(keys)
    return ModelEntries(keys, builder), builder


def test_a_spec_is_built_once_when_first_read() -> None:
    entries, builder = _entries([("a", "m1"), ("b", "m2"), ("c", "m3")])
    assert builder.built == []
    assert entries[1].context_window == 1001
    assert entries[-1].id == "m3"  # negative positions count from the end
    assert entries[1] is entries[1]
    assert builder.built == [1, 2]
    assert [s.id for s in entries[0:2]] == ["m1", "m2"]
    assert [s.provider for s in entries] == ["a", "b", "c"]
    assert sorted(builder.built) == [0, 1, 2]


@pytest.mark.parametrize("position", [3, -4])
def test_a_position_out_of_range_is_an_index_error(position: int) -> None:
    entries, _ = _entries([("a", "m1"), ("b", "m2"), ("c", "m3")])
    with pytest.raises(IndexError):
        entries[position]


def test_looking_an_id_up_builds_only_its_specs() -> None:
    entries, builder = _entries([("a", "Same"), ("b", "other"), ("c", "same")])
    by_id = SpecsById(entries)
    assert "same" in by_id and "Same" not in by_id
    assert sorted(by_id) == ["other", "same"] and len(by_id) == 2
    assert [s.provider for s in by_id["same"]] == ["a", "c"]  # priority order kept
    assert sorted(builder.built) == [0, 2]
    assert by_id.get("missing") is None


def test_joined_entries_keep_the_chosen_positions_in_order_and_build_lazily() -> None:
    first, first_builder = _entries([("a", "x"), ("a", "y")])
    second, second_builder = _entries([("b", "y"), ("b", "z")])
    joined = ModelEntries.joined([(first, range(2)), (second, [1])])
    assert joined.keys == (("a", "x"), ("a", "y"), ("b", "z"))
    assert first_builder.built == [] and second_builder.built == []
    assert joined[2].id == "z" and second_builder.built == [1] and first_builder.built == []


def test_a_catalog_given_built_specs_resolves_as_before() -> None:
    catalog = Catalog(models=(_spec("a", "m1", 5000), _spec("b", "m1", 7000)))
    assert isinstance(catalog.models, ModelEntries)
    assert catalog.resolve_window("m1").context_window == 5000  # the first listed wins


def test_the_bundled_catalog_resolves_an_id_without_building_every_model() -> None:
    catalog = build_catalog(json.loads(bundled_text()), "bundled")  # fresh: nothing read yet
    catalog.resolve_window("gpt-4o-2024-08-06")
    built = sum(spec is not None for spec in catalog.models._specs)
    assert 0 < built < len(catalog.models) / 10
    assert len({s.id for s in catalog.models}) > 1000  # every one can still be read


def test_the_bundled_file_is_read_lazily_and_as_json_reads_it() -> None:
    whole = json.loads(bundled_text())
    read = read_document(bundled_text())
    assert isinstance(read["models"], LazyEntries)  # the generated layout: entries parsed on use
    assert {k: v for k, v in read.items() if k != "models"} == {
        k: v for k, v in whole.items() if k != "models"
    }
    expected = [EntryHead(e["id"], e["provider"], e.get("aliases"), e.get("match")) for e in whole["models"]]
    assert list(entry_heads(read["models"])) == expected
    assert list(read["models"]) == whole["models"]


def test_lazily_and_wholly_read_catalogs_resolve_and_build_alike() -> None:
    lazy = build_catalog(read_document(bundled_text()), "bundled")
    whole = build_catalog(json.loads(bundled_text()), "bundled")
    assert lazy.aliases == whole.aliases and lazy.matches == whole.matches
    for model_id in (
        "gpt-4o",
        "claude-3-5-sonnet-latest",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "gemini-pro",
    ):
        assert lazy.resolve_window(model_id) == whole.resolve_window(model_id)
    assert list(lazy.models) == list(whole.models)


def _document(models: list[dict[str, object]]) -> dict[str, object]:
    return {"schema_version": 1, "tokenizers": {}, "models": models}


def _generated(document: dict[str, object], ordered: bool = True, ensure_ascii: bool = True) -> str:
    """The layout scripts/gen_catalog.py writes: one entry a line, the models last, and (when
    ``ordered``) each entry's id, provider, aliases and match first."""
    first = ("id", "provider", "aliases", "match")
    models: list[dict[str, object]] = document["models"]  # type: ignore[assignment]
    if ordered:
        models = [{**{k: m[k] for k in first if k in m}, **m} for m in models]
    head = json.dumps(
        {k: v for k, v in document.items() if k != "models"}, indent=1, ensure_ascii=ensure_ascii
    )[:-2]
    lines = [json.dumps(m, separators=(",", ":"), ensure_ascii=ensure_ascii) for m in models]
    return head + ',\n "models": [\n' + ",\n".join(lines) + "\n ]\n}\n"


MODEL = {"id": "m", "provider": "p", "context_window": 10}


@pytest.mark.parametrize(
    "models",
    [
        [MODEL, {**MODEL, "id": "n"}],
        [{"provider": "p", "id": "m", "context_window": 10}],  # keys in another order
        [
            {
                "id": 'm\u00e9\\"q',
                "provider": "p",
                "aliases": ["a", "b\nc"],
                "match": {"or": [{"equals": "x"}]},
            }
        ],
        [{"id": "m", "provider": "p", "match": {"equals": "z"}, "aliases": ["a"]}],  # match before aliases
        [{"id": "m", "provider": "p", "aliases": ['a"b', "c"], "context_window": 1}],  # an escape in an alias
        [{"id": "m", "provider": "p", "match": None, "context_window": 1}],
        [{"id": 3, "provider": "p"}],
    ],
)
def test_a_document_reads_the_same_in_any_layout(models: list[dict[str, object]]) -> None:
    document = _document(models)
    for text in (_generated(document), json.dumps(document, indent=2), json.dumps(document)):
        read = read_document(text)
        assert list(read["models"]) == models
        assert {k: v for k, v in read.items() if k != "models"} == {
            k: v for k, v in document.items() if k != "models"
        }
        heads = entry_heads(read["models"])
        assert [(h.id, h.provider, h.aliases, h.match) for h in heads] == [
            (m["id"], m["provider"], m.get("aliases"), m.get("match")) for m in models
        ]


def test_entries_whose_id_and_provider_do_not_lead_are_read_whole() -> None:
    models = [MODEL, {"provider": "p", "id": "n"}, {"id": "o", "kind": "chat", "provider": "p"}]
    for entries in ([models[0], models[1]], [models[0], models[2]]):
        read = read_document(_generated(_document(entries), ordered=False))
        assert not isinstance(read["models"], LazyEntries)
        assert [(h.id, h.provider) for h in entry_heads(read["models"])] == [(m["id"], "p") for m in entries]


def test_a_broken_document_is_json_s_error() -> None:
    text = _generated(_document([MODEL])).replace('"m"', '"m', 1)
    with pytest.raises(json.JSONDecodeError):
        read_document(text)


CATALOG = Path(__file__).resolve().parent.parent / "src" / "ctxbudget" / "catalog"


def test_the_shipped_index_describes_the_shipped_file() -> None:
    """models.index.json is what scripts/index_catalog.py writes for models.json (run it after a
    change to models.json)."""
    shipped = json.loads((CATALOG / "models.index.json").read_bytes())
    assert shipped == index_of((CATALOG / "models.json").read_bytes())
    assert read_bundled(CATALOG / "models.json", CATALOG / "models.index.json") is not None  # used


def test_the_bundled_document_read_by_its_index_is_the_whole_document() -> None:
    whole = json.loads(bundled_text())
    read = bundled_document()
    assert isinstance(read["models"], LazyEntries)
    assert type(read["models"]._read).__name__ == "_LineReader"  # read by the index, not the text
    assert {k: v for k, v in read.items() if k != "models"} == {
        k: v for k, v in whole.items() if k != "models"
    }
    assert list(read["models"]) == whole["models"]
    expected = [EntryHead(e["id"], e["provider"], e.get("aliases"), e.get("match")) for e in whole["models"]]
    assert list(entry_heads(read["models"])) == expected


def _written(folder: Path, models: list[dict[str, object]]) -> tuple[Path, Path]:
    document = {**_document(models), "aliases": [{"alias": "x", "target": "m"}]}
    text = _generated(document, ensure_ascii=False)  # as scripts/gen_catalog.py writes it
    (folder / "models.json").write_text(text, "utf-8")
    (folder / "models.index.json").write_text(json.dumps(index_of(text.encode("utf-8"))), "utf-8")
    return folder / "models.json", folder / "models.index.json"


def test_an_index_reads_entries_beyond_ascii_from_their_lines(tmp_path: Path) -> None:
    models = [{**MODEL, "id": "m\u00e9\u4e2d", "note": "\u00e9" * 50}, {**MODEL, "id": "n", "aliases": ["a"]}]
    document = read_bundled(*_written(tmp_path, models))
    assert document is not None
    assert document["aliases"] == [{"alias": "x", "target": "m"}]
    assert list(reversed(document["models"])) == list(reversed(models))  # each line found by its offset
    assert build_catalog(document, "t").resolve_window("a").context_window == 10


def test_an_index_of_another_file_is_not_used(tmp_path: Path) -> None:
    models_path, index_path = _written(tmp_path, [MODEL, {**MODEL, "id": "n", "aliases": ["ab"]}])
    text = models_path.read_text("utf-8")
    models_path.write_text(text.replace('"context_window":10', '"context_window":100', 1), "utf-8")
    assert read_bundled(models_path, index_path) is None  # the length changed: the text is read whole
    models_path.write_text(text.replace('"ab"', '"cd"'), "utf-8")  # the same length
    assert read_bundled(models_path, index_path) is None  # the CRC-32 changed
    models_path.write_text(text, "utf-8")
    index = json.loads(index_path.read_text("utf-8"))
    for changed in (
        {"head": []},
        {"ids": 5},
        {"ids": "m"},  # one id for two offsets
        {"providers": ["p", "p"]},
        {"offsets": [0]},
        {"offsets": ["0", 5]},
        {"rules": []},
        {"format": 1},
    ):
        index_path.write_text(json.dumps({**index, **changed}), "utf-8")
        assert read_bundled(models_path, index_path) is None  # not an index of this file's shape
    for broken in ("{not json", "[" * 100_000 + "]" * 100_000):
        index_path.write_text(broken, "utf-8")
        assert read_bundled(models_path, index_path) is None
    index_path.unlink()
    assert read_bundled(models_path, index_path) is None


def test_a_file_replaced_after_it_was_read_does_not_change_what_is_read(tmp_path: Path) -> None:
    models_path, index_path = _written(tmp_path, [MODEL, {**MODEL, "id": "n"}])
    document = read_bundled(models_path, index_path)
    assert document is not None
    models_path.write_text("\n" + models_path.read_text("utf-8"), "utf-8")  # a package upgraded
    assert [m["id"] for m in document["models"]] == ["m", "n"]


def test_an_index_whose_offsets_do_not_name_its_models_lines_is_an_error(tmp_path: Path) -> None:
    models_path, index_path = _written(tmp_path, [MODEL, {**MODEL, "id": "n"}])
    index = json.loads(index_path.read_text("utf-8"))
    index["offsets"][0] = index["offsets"][1]  # model m's offset names n's line
    index_path.write_text(json.dumps(index), "utf-8")
    document = read_bundled(models_path, index_path)
    assert document is not None
    assert document["models"][1]["id"] == "n"
    with pytest.raises(ConfigError, match="does not match its index at model 'm'"):
        document["models"][0]


@pytest.mark.parametrize(
    "rules",
    [
        "[",
        "[[0, 5, null]]",
        "[[2, null, null]]",
        "[[0, [3], null]]",
        "[[0, null, []]]",
        "{}",
        "[[-1, null, null]]",
    ],
)
def test_an_index_whose_rules_cannot_be_read_is_an_error_when_they_are_first_needed(
    tmp_path: Path, rules: str
) -> None:
    models_path, index_path = _written(tmp_path, [MODEL, {**MODEL, "id": "n", "aliases": ["ab"]}])
    index = json.loads(index_path.read_text("utf-8"))
    index_path.write_text(json.dumps({**index, "rules": rules}), "utf-8")
    document = read_bundled(models_path, index_path)
    assert document is not None  # read without its rules: an id the catalog lists needs none
    catalog = build_catalog(document, "t")
    assert catalog.resolve_window("n").context_window == 10
    with pytest.raises(ConfigError, match="aliases and match rules it cannot read"):
        catalog.resolve_window("ab")


def test_an_index_reads_no_alias_or_rule_for_an_id_the_catalog_lists() -> None:
    document = bundled_document()
    catalog = build_catalog(document, "bundled")
    assert catalog.resolve_window("gpt-4o").rule == "exact"
    assert document["models"].heads._rules is None  # the rules' text was never parsed
    assert catalog.resolve_window("gpt-4o-2024-08-06").rule == "alias"
    assert document["models"].heads._rules is not None


def test_a_document_not_in_the_generated_layout_has_no_index() -> None:
    with pytest.raises(ValueError, match="generated layout"):
        index_of(json.dumps(_document([MODEL])).encode("utf-8"))


@pytest.mark.parametrize(
    "given",
    [{"matches": {("p", "m1"): {"regex": "m1("}}}, {"owners": (("p", {"regex": "m1("}),)}],
)
def test_a_catalog_built_in_code_whose_rule_does_not_compile_is_a_config_error(
    given: dict[str, object],
) -> None:
    # its rules were never read from a file: the regex compiles when first matched, and a bad one
    # is the ConfigError it was when the catalog's rules compiled together (not re.error)
    catalog = Catalog(models=[_spec("p", "m1")], **given)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"match regex 'm1\(' does not compile"):
        catalog.resolve_window("m1-x")


def test_threads_reading_a_position_first_at_once_get_one_spec() -> None:
    # two threads that each built it held equal specs, not the same one: resolution tells an id's
    # readings apart by identity (an alias was read as 'scoped' by its provider rule)
    import threading
    import time

    built: list[int] = []

    def slow(position: int) -> ModelSpec:
        built.append(position)
        time.sleep(0.02)
        return _spec("p", f"m{position}")

    entries = ModelEntries([("p", "m0")], slow)
    start = threading.Barrier(8)
    got: list[ModelSpec] = []

    def read() -> None:
        start.wait()
        got.append(entries[0])

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert built == [0] and len({id(spec) for spec in got}) == 1


def test_a_lookup_answers_though_another_thread_clears_the_memo_meanwhile() -> None:
    """Another thread's lookup may clear the bounded memo between this one's store and its read
    (it read the memo back: a KeyError)."""

    class ClearedAfterEachStore(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: object, value: object) -> None:
            super().__setitem__(key, value)
            self.clear()  # as another thread's lookup over the bound does

    catalog = build_catalog(json.loads(bundled_text()), "bundled")
    object.__setattr__(catalog, "_found", ClearedAfterEachStore())
    assert catalog.resolve_window("gpt-4o").context_window == catalog.get_model("gpt-4o").context_window
    assert catalog.find_model("no-such-model-here") is None
