"""The core never imports the shell (session, simulation, semantic) or the edges (cli, gateway)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "ctxbudget"
OUTER = ("session", "simulation", "semantic", "cli", "gateway")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(("." * node.level) + node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_core_modules_do_not_import_the_shell_or_the_edges() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).parts
        if relative[0] in (*OUTER, "cli.py", "__init__.py", "__main__.py") or relative[0].startswith(OUTER):
            continue
        for name in _imports(path):
            parts = name.lstrip(".").split(".")
            if parts[0] in OUTER or (parts[0] == "ctxbudget" and len(parts) > 1 and parts[1] in OUTER):
                offenders.append(f"{path.relative_to(SRC)} imports {name}")
    assert offenders == []
