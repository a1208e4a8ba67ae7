"""Policy files: validated at the boundary, errors naming the file and the field."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ctxbudget.assembly._policy import get_policy, list_policies, load_policy, parse_policy
from ctxbudget.errors import ConfigError
from ctxbudget.volatile import VolatileRules

from .test_assemble import SMALL

BUNDLED = (Path(__file__).parents[1] / "src/ctxbudget/policies/legal-review.toml").read_text()


def test_the_bundled_legal_policy_carries_the_spec_blocks() -> None:
    policy = get_policy("legal-review")
    assert (policy.ledger_ceiling_tokens, policy.current_turn_ceiling_tokens) == (5000, 2000)
    assert policy.prompt_tokens == 32000 and policy.compaction.keep_recent_turns == 2
    assert policy.volatile == VolatileRules()


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("ledger_ceiling_tokens = 5000", "ledger_ceiling_tokens = 0", "ledger_ceiling_tokens"),
        (
            "current_turn_ceiling_tokens = 2000",
            "current_turn_ceiling_tokens = -5",
            "current_turn_ceiling_tokens",
        ),
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "x", regex = "(unclosed"}]\n[compaction]',
            "volatile",
        ),
        ("[compaction]", '[volatile]\nallow = ["[z-a]"]\n[compaction]', "volatile"),
        ("[compaction]", "[volatile]\nunknown = 1\n[compaction]", "volatile"),
    ],
)
def test_bad_settings_name_the_file_and_the_field(old: str, new: str, field: str) -> None:
    text = BUNDLED.replace(old, new, 1)
    with pytest.raises(ConfigError, match=rf"custom\.toml: .*{field}"):
        parse_policy(text, "custom.toml")


def test_volatile_rules_come_from_the_file() -> None:
    text = BUNDLED.replace(
        "[compaction]",
        '[volatile]\npatterns = [{kind = "ticket", regex = "TKT-\\\\d+"}]\nallow = ["Effective 2026-01-01"]\n\n[compaction]',
        1,
    )
    policy = parse_policy(text, "custom.toml")
    assert policy.volatile == VolatileRules(
        patterns=(("ticket", r"TKT-\d+"),), allow=("Effective 2026-01-01",)
    )


def test_files_and_names_are_both_loaded(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(BUNDLED.replace('name = "legal-review"', 'name = "mine"'))
    assert load_policy(str(path)).name == "mine" and "legal-review" in list_policies()
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        load_policy("nope")
    with pytest.raises(ConfigError, match="cannot read policy file"):
        load_policy(str(tmp_path / "missing.toml"))
    for missing in ("MISSING.YAML", "missing.Yml", "Missing.TOML"):  # a path by its extension, any case
        with pytest.raises(ConfigError, match=f"cannot read policy file '.*{missing}': No such file"):
            load_policy(str(tmp_path / missing))


def test_a_yaml_exponent_is_a_number_and_a_count_past_a_billion_a_short_error(tmp_path: Path) -> None:
    """``45e-2`` is a number (YAML 1.1 read it as text: "not a valid number"), as in TOML; a
    token count of thousands of digits is refused at the file, in one short line (it printed
    11 kB of digits when the envelope could not fit)."""
    path = tmp_path / "p.yaml"
    head = "name: y\ntiers:\n  - {name: pinned, ceiling_tokens: 300, eviction: never, cached: true}\n"
    for written in ("45e-2", "4.5e-1", "0.45e0", "4.5E-1", "+45e-2", ".45e0"):
        path.write_text(head + f"envelope_tokens: 900\ncost_ceiling_usd: {written}\n")
        assert load_policy(str(path)).cost_ceiling_usd == 0.45, written
    path.write_text(head + "envelope_tokens: 9e2\n")  # a count is an integer, as in TOML
    with pytest.raises(ConfigError, match=r"\$\.envelope_tokens: Input should be a valid integer"):
        load_policy(str(path))
    path.write_text(head + "envelope_tokens: 900\ncost_ceiling_usd: 1e400\n")
    with pytest.raises(ConfigError, match=r"\$\.cost_ceiling_usd: Input should be a finite number"):
        load_policy(str(path))
    path.write_text(head + "envelope_tokens: " + "9" * 4001 + "\n")
    with pytest.raises(ConfigError) as raised:
        load_policy(str(path))
    assert str(raised.value).endswith("$.envelope_tokens: Input should be less than or equal to 1000000000")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_policy_or_catalog_file_that_never_ends_is_refused_at_its_size() -> None:
    """``--policy /dev/zero`` read until the memory ran out: a configuration file is read to
    :data:`CONFIG_FILE_BYTES` at most, and one past it is one line naming it."""
    from ctxbudget import load_catalog

    with pytest.raises(ConfigError, match="policy file '/dev/zero' is over 16 MiB: no policy is that large"):
        load_policy("/dev/zero")
    with pytest.raises(ConfigError, match="catalog file '/dev/zero' is over 16 MiB"):
        load_catalog(["/dev/zero"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('eviction = "never"', 'eviction = "sometimes"'), r"\$\.tiers\[0\]\.eviction"),
        (('name = "critical"', 'name = "pinned"'), "unique"),
        (('cache_ttl = "1h"', 'cache_ttl = "5m"\n'), None),
    ],
)
def test_policy_files_are_validated(edit: tuple[str, str], message: str | None) -> None:
    text = SMALL.replace(*edit)
    if message is None:
        parse_policy(text, "ok.toml")
        return
    with pytest.raises(ConfigError, match=message):
        parse_policy(text, "bad.toml")


def test_five_minute_tier_before_a_one_hour_tier_is_refused() -> None:
    text = SMALL.replace('cache_ttl = "1h"', 'cache_ttl = "5m"').replace(
        'name = "critical"\nceiling_tokens = 150\neviction = "protected"\ncached = true',
        'name = "critical"\nceiling_tokens = 150\neviction = "protected"\ncached = true\ncache_ttl = "1h"',
    )
    with pytest.raises(ConfigError, match="1h"):
        parse_policy(text, "bad.toml")


def test_a_pinned_tier_after_another_tier_is_refused() -> None:
    """A never tier after a compact one: a second turn rewrote the whole prefix (read 0, written
    20,468) while the report said the pinned prefix was byte-identical (INV-CTX-01)."""
    text = (
        'name = "order"\nenvelope_tokens = 32000\n'
        '[[tiers]]\nname = "contextual"\nceiling_tokens = 4000\neviction = "compact"\ncached = true\n'
        '[[tiers]]\nname = "pinned"\nceiling_tokens = 15000\neviction = "never"\ncached = true\n'
        '[[tiers]]\nname = "volatile"\nceiling_tokens = 3000\neviction = "rolling"\n'
    )
    with pytest.raises(ConfigError, match=r"pinned.*before all others"):
        parse_policy(text, "order.toml")


@pytest.mark.parametrize("name", ["  ", "p\\u0000x", "a\\nb"])
def test_a_policy_name_is_printable_and_not_blank(name: str) -> None:
    """A blank name, or one with a NUL (printed into stderr) or a line break, was accepted."""
    text = f'name = "{name}"\nenvelope_tokens = 1000\n[[tiers]]\nname = "v"\nceiling_tokens = 500\neviction = "rolling"\n'
    with pytest.raises(ConfigError, match="name must be printable text, not blank"):
        parse_policy(text, "p.toml")


def test_a_yaml_merge_key_is_said_to_be_unsupported(tmp_path: Path) -> None:
    """`<<: *defaults` failed with PyYAML's 'could not determine a constructor for the tag'."""
    from ctxbudget.assembly._policy import load_policy

    path = tmp_path / "m.yaml"
    path.write_text(
        "defaults: &d\n  ceiling_tokens: 100\nname: y\nenvelope_tokens: 900\n"
        "tiers:\n  - <<: *d\n    name: p\n    eviction: never\n"
    )
    with pytest.raises(ConfigError, match=r"merge keys \(<<\) are not supported"):
        load_policy(str(path))


@pytest.mark.parametrize("file_name", ["p.yaml", "p.YAML"])  # good.YAML was read as TOML
def test_yaml_policy_files_are_accepted(tmp_path: Path, file_name: str) -> None:
    from ctxbudget.assembly._policy import load_policy

    path = tmp_path / file_name
    path.write_text(
        "name: y\nenvelope_tokens: 900\ntiers:\n"
        "  - {name: pinned, ceiling_tokens: 300, eviction: never, cached: true}\n"
        "  - {name: chat, ceiling_tokens: 300, eviction: rolling}\n"
    )
    policy = load_policy(str(path))
    assert [t.name for t in policy.tiers] == ["pinned", "chat"]
    path.write_text("name: y\nenvelope_tokens: -1\ntiers: []\n")
    with pytest.raises(ConfigError, match=re.escape(file_name) + r": \$\.envelope_tokens"):
        load_policy(str(path))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # a nested repetition runs in exponential time on a text it does not match
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "(a+)+$"}]\n[compaction]',
            "repeats a repetition",
        ),
        # an unbounded repeat inside a counted one: (.*a){12}x on 40 a's ran for minutes
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "(.*a){12}x"}]\n[compaction]',
            r"'\(\.\*a\)\{12\}x' holds an unbounded repeat inside a counted one",
        ),
        # unbounded repeats side by side over the same characters: \w*\w*X took 11 s on 3,000
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "\\\\w*\\\\w*\\\\w*X"}]\n[compaction]',
            r"'\\w\*\\w\*\\w\*X' has two unbounded repeats over the same characters",
        ),
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "(TKT-\\\\d+)?"}]\n[compaction]',
            "matches the empty text",
        ),
        (  # not the POSIX class it looks like: Python warned (FutureWarning) on stderr, then matched a set
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "TKT-[[:digit:]]+"}]\n[compaction]',
            r"\$\.volatile\.patterns\[0\]: .* is ambiguous to Python \(Possible nested set",
        ),
        (  # named at its place, not at $.volatile
            "[compaction]",
            '[volatile]\nallow = ["EX-\\\\d+", "("]\n[compaction]',
            r"\$\.volatile\.allow\[1\]: not a valid regular expression",
        ),
        # zero-width at word boundaries: every assembly then failed on a volatile value ''
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "\\\\b"}]\n[compaction]',
            "matches the empty text",
        ),
        (
            "[compaction]",
            '[volatile]\npatterns = [{kind = "t", regex = "(?=a)"}]\n[compaction]',
            "matches the empty text",
        ),
        (
            "cost_ceiling_usd = 0.45",
            "cost_ceiling_usd = inf",
            r"\$\.cost_ceiling_usd: Input should be a finite number",
        ),
        (
            "cost_ceiling_usd = 0.45",
            'cost_ceiling_usd = "0.45"',
            r"\$\.cost_ceiling_usd: Input should be a valid number",
        ),
        (
            "envelope_tokens = 32000",
            "envelope_tokens = 32000.0",
            r"\$\.envelope_tokens: Input should be a valid integer",
        ),
        (
            "ceiling_tokens = 15000",
            "ceiling_tokens = true",
            r"ceiling_tokens: Input should be a valid integer",
        ),
        (
            'eviction = "never"',
            'evicton = "never"',
            r"\.evicton: Extra inputs are not permitted",
        ),  # the typo, named
    ],
)
def test_values_are_taken_as_written_and_dangerous_patterns_refused(old: str, new: str, message: str) -> None:
    assert old in BUNDLED
    with pytest.raises(ConfigError, match=message):
        parse_policy(BUNDLED.replace(old, new, 1), "custom.toml")


def test_odd_yaml_and_toml_files_are_one_line_errors(tmp_path: Path) -> None:
    cases = {
        "dup.yaml": ("name: a\nname: b\n", "the key 'name' is given twice at line 2, column 1"),
        "tab.yaml": ("name: a\n\tx: 1\n", "not valid YAML: found character"),
        "deep.yaml": ("x: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply to read"),
        "deep.toml": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply to read"),
        "big.yaml": ("name: a\nenvelope_tokens: " + "9" * 5000 + "\n", "Exceeds the limit"),
        # YAML 1.1 reads these as octal (6,656), base 60 (100) and 90.5: not what was written
        "octal.yaml": ("name: a\nenvelope_tokens: 015000\n", "the number '015000' is not a plain decimal"),
        "base60.yaml": ("name: a\nenvelope_tokens: 1:40\n", "the number '1:40' is not a plain decimal"),
        "base60f.yaml": ("name: a\ncost_ceiling_usd: 1:30.5\n", "the number '1:30.5' is not a plain decimal"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigError) as refused:
            load_policy(str(path))
        assert message in str(refused.value) and "\n" not in str(refused.value), name


def test_a_tier_named_like_an_index_is_found_by_its_name() -> None:
    text = BUNDLED.replace('name = "volatile"', 'name = "0"', 1)
    policy = parse_policy(text, "custom.toml")
    assert policy.get_tier("0").name == "0" and policy.get_tier("0").index != 0
    assert policy.get_tier(0).index == 0


def test_a_bundled_policy_name_is_the_bundled_policy_whatever_the_folder_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "legal-review").mkdir()
    assert load_policy("legal-review") == get_policy("legal-review")
    (tmp_path / "mine").write_text((tmp_path / "missing").name)  # a name no bundle has: read as a file
    with pytest.raises(ConfigError, match="mine"):
        load_policy("mine")


def test_a_yaml_policy_with_a_list_for_a_key_is_a_one_line_error(tmp_path: Path) -> None:
    """`? [1, 2]` as a key raised TypeError (unhashable type: 'list') out of the duplicate-key check."""
    from ctxbudget.assembly._policy import load_policy

    path = tmp_path / "p.yaml"
    path.write_text("name: y\nenvelope_tokens: 900\n? [1, 2]\n: x\ntiers: []\n")
    with pytest.raises(ConfigError, match=r"p.yaml: not valid YAML: a key must be a name, not a list"):
        load_policy(str(path))


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        (r"\w*\w*\w*\w*\w*X", True),
        (r".*.*", True),
        (r"\d+\w+", True),
        (r"\d+\s*days", False),
        (r"\d+-\d+-\d+", False),
        (r"[A-Z]+\d+", False),
        (r"^gpt-4.*-preview$", False),
        # only optional parts between: \w+\s?\w+\s?\w+! took 52 s on 800 characters
        (r"\w+\s?\w+\s?\w+!", True),
        (r"\w+\.?\w+", True),
        (r"\d+(?:px)?\d+", True),  # without its px, \d+\d+
        # in groups: (\w+)\s?(\w+)\s?(\w+)! passed and ran 134 s on 800 characters
        (r"(\w+)\s?(\w+)\s?(\w+)!", True),
        (r"\w+(\s?)\w+!", True),
        (r"\w+(?:\s|)\w+", True),
        (r"(\d+)-(\d+)", False),
        (r"[A-Z]+-?\d+", False),
        (r"\w+ \w+", False),
    ],
)
def test_unbounded_repeats_side_by_side_are_refused_when_their_characters_overlap(
    pattern: str, refused: bool
) -> None:
    from ctxbudget.regexes import repeats_a_repetition

    assert repeats_a_repetition(pattern) is refused


@pytest.mark.parametrize("name", ["ledger", "current"])
def test_a_tier_may_not_take_the_name_of_the_ledgers_or_the_current_turns_block(name: str) -> None:
    """A tier named "current" had its tokens added to Block 4's (932 against a ceiling of 50,
    with no failure), one named "ledger" to Block 3's."""
    from ctxbudget.assembly._policy import parse_policy

    text = f'name = "p"\nenvelope_tokens = 1000\n[[tiers]]\nname = "{name}"\nceiling_tokens = 500\neviction = "rolling"\n'
    with pytest.raises(ConfigError, match="names a block of every assembly, not a tier"):
        parse_policy(text, "p.toml")


@pytest.mark.parametrize(
    ("content", "found"), [("- a\n- b\n", "got a list"), ("", "got nothing"), ("7\n", "got a number")]
)
def test_a_yaml_policy_that_is_not_a_table_says_so(tmp_path: Path, content: str, found: str) -> None:
    """It said "Input should be a valid dictionary or instance of _PolicyFile"."""
    from ctxbudget.assembly._policy import load_policy

    path = tmp_path / "p.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=rf"p.yaml: a policy is a table of settings .*, {found}$") as caught:
        load_policy(str(path))
    assert "_PolicyFile" not in str(caught.value)


def test_a_policy_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # Windows editors write one; "not valid TOML: Invalid statement (at line 1, column 1)" said
    # nothing of it, where a JSON body with one is read.
    path = tmp_path / "bom.toml"
    path.write_bytes(
        b"\xef\xbb\xbf" + BUNDLED.replace('name = "legal-review"', 'name = "bom"').encode("utf-8")
    )
    assert load_policy(str(path)).name == "bom"
    yaml_file = tmp_path / "bom.yaml"
    yaml_file.write_bytes(b"\xef\xbb\xbfname: bom\n")
    with pytest.raises(ConfigError, match=r"bom\.yaml: \$\.\w+: Field required"):  # read, then checked
        load_policy(str(yaml_file))


def test_a_bundled_policy_is_parsed_once_and_cannot_be_changed() -> None:
    """A process shares one value of each bundled policy (two threads asking first at once may
    each parse it: equal values); no caller can change it for the others."""
    first = load_policy("legal-review")
    assert get_policy("legal-review") is first  # one frozen value, shared
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "changed"  # type: ignore[misc]
    for value in (first, first.tiers[0], first.compaction, first.volatile):  # no __dict__ to write into
        assert not hasattr(value, "__dict__")
    assert list_policies() == sorted(list_policies()) and "legal-review" in list_policies()
