"""Policy files written in YAML: PyYAML's safe loader, strict where YAML 1.1 is loose.

Imported only to read a ``.yaml``/``.yml`` policy, so a command given a TOML policy (every
bundled one) never imports PyYAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..errors import ConfigError, unreadable_file

__all__ = ["load_yaml"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (as TOML does): the last
    one silently won."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # PyYAML said "could not determine a constructor"
                raise yaml.constructor.ConstructorError(
                    None, None, "merge keys (<<) are not supported: write the keys out", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool) and key is not None:  # a list or a map as a key
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key must be a name, not a {type(key).__name__}", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_plain_int(self, node: yaml.ScalarNode) -> int:
        """A decimal integer as written: YAML 1.1 reads ``015000`` as octal (6,656), ``1:40``
        as base 60 (100) and ``1_000`` as 1000, where TOML refuses the first two."""
        text = str(self.construct_scalar(node))
        if not re.fullmatch(r"[-+]?(0|[1-9][0-9]*)", text):
            raise yaml.constructor.ConstructorError(
                None, None, f"the number {text!r} is not a plain decimal integer", node.start_mark
            )
        return int(text)

    def construct_plain_float(self, node: yaml.ScalarNode) -> float:
        """A number as written: YAML 1.1 reads ``1:30.5`` as base 60 (90.5)."""
        text = str(self.construct_scalar(node))
        if ":" in text or "_" in text:
            raise yaml.constructor.ConstructorError(
                None, None, f"the number {text!r} is not a plain decimal number", node.start_mark
            )
        return float(super().construct_yaml_float(node))


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_plain_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_plain_float)
# YAML 1.1 reads a number with an exponent but no point (``45e-2``, ``1e308``), or with a point
# and an unsigned exponent (``4.5e1``), as text, which the policy then refused as "not a valid
# number"; YAML 1.2 and TOML read it as the number it is.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (its text runs over several)."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def load_yaml(text: str, source: str) -> object:
    """The document of the YAML policy ``text``; an error (a syntax error, a key given twice, a
    number YAML 1.1 reads otherwise than written, nesting too deep) names ``source``."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from exc
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
        raise unreadable_file(source, exc) from exc
