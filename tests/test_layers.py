"""The layers hold: a shared core under two pipelines (fitting, assembly) under the shell (session,
semantic) under the edges (cli, gateway, the framework integrations, and the simulation, which drives the real gateway). Nothing imports upward, the pipelines do not
import each other, and code outside a package reaches it only through its ``__init__``."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "ctxbudget"
PIPELINES = ("fitting", "assembly")
SHELL = ("session", "semantic")
EDGES = ("cli", "gateway", "simulation", "integrations")
# What each layer may not import (the top-level package name under ctxbudget).
FORBIDDEN = {
    "core": (*PIPELINES, *SHELL, *EDGES),
    "fitting": ("assembly", *SHELL, *EDGES),
    "assembly": ("fitting", *SHELL, *EDGES),
    "shell": EDGES,
    "edges": (),
}


def _layer(top: str) -> str:
    if top in PIPELINES:
        return top
    if top in SHELL:
        return "shell"
    if top in EDGES:
        return "edges"
    return "core"


def _imports(path: Path) -> list[tuple[str, ...]]:
    """Every ctxbudget module the file imports, as parts under the package (``("assembly", "_tiers")``)."""
    here = path.relative_to(SRC).with_suffix("").parts
    package = here[:-1]
    found: list[tuple[str, ...]] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = (*base, *(node.module or "").split(".")) if node.module else base
                found.append(tuple(p for p in target if p))
                if not node.module:
                    found.extend((*base, alias.name) for alias in node.names)
            elif node.module and node.module.startswith("ctxbudget."):
                found.append(tuple(node.module.split(".")[1:]))
        elif isinstance(node, ast.Import):
            found.extend(tuple(a.name.split(".")[1:]) for a in node.names if a.name.startswith("ctxbudget."))
    return [t for t in found if t]


def _sources() -> list[tuple[Path, tuple[str, ...]]]:
    return [(p, p.relative_to(SRC).parts) for p in sorted(SRC.rglob("*.py"))]


def test_no_layer_imports_a_layer_above_it_or_the_other_pipeline() -> None:
    offenders = []
    for path, parts in _sources():
        if parts[0] in ("__init__.py", "__main__.py"):
            continue
        layer = _layer(parts[0].removesuffix(".py"))
        for target in _imports(path):
            if target[0].removesuffix(".py") in FORBIDDEN[layer]:
                offenders.append(f"{'/'.join(parts)} ({layer}) imports {'.'.join(target)}")
    assert offenders == []


def test_other_packages_reach_a_pipeline_only_through_its_init() -> None:
    offenders = []
    for path, parts in _sources():
        for target in _imports(path):
            inside = parts[0] == target[0]
            if target[0] in PIPELINES and not inside and len(target) > 1 and target[1].startswith("_"):
                offenders.append(f"{'/'.join(parts)} imports {'.'.join(target)}")
    assert offenders == []


def test_the_layer_check_sees_imports() -> None:
    """The walk above finds relative and absolute imports alike (a check that sees nothing passes)."""
    imports = _imports(SRC / "assembly" / "_assemble.py")
    assert ("assembly", "_tiers") in imports
    assert ("tokens", "counter") in imports
    assert ("catalog", "catalog") in imports
