"""Policy files: validated at the boundary, errors naming the file and the field."""

from __future__ import annotations

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


def test_yaml_policy_files_are_accepted(tmp_path: Path) -> None:
    from ctxbudget.assembly._policy import load_policy

    path = tmp_path / "p.yaml"
    path.write_text(
        "name: y\nenvelope_tokens: 900\ntiers:\n"
        "  - {name: pinned, ceiling_tokens: 300, eviction: never, cached: true}\n"
        "  - {name: chat, ceiling_tokens: 300, eviction: rolling}\n"
    )
    policy = load_policy(str(path))
    assert [t.name for t in policy.tiers] == ["pinned", "chat"]
    path.write_text("name: y\nenvelope_tokens: -1\ntiers: []\n")
    with pytest.raises(ConfigError, match=r"p.yaml: \$\.envelope_tokens"):
        load_policy(str(path))
