"""Write src/ctxbudget/catalog/models.index.json, the index of the bundled models.json.

`make catalog` runs it after scripts/gen_catalog.py; run it alone after changing models.json by
hand (the test suite fails while the index does not describe the file). The index is data derived
from models.json: its other keys, the models' ids and providers, the byte offset of each model's
line, and the aliases and match rules as a JSON text of their own (see ctxbudget.catalog.bundled).

    python scripts/index_catalog.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ctxbudget.catalog.bundled import index_of

CATALOG = Path(__file__).resolve().parent.parent / "src" / "ctxbudget" / "catalog"


def write_index(folder: Path = CATALOG) -> Path:
    """Write ``models.index.json`` beside ``models.json`` in ``folder``; the index's path."""
    index = index_of((folder / "models.json").read_bytes())
    out = folder / "models.index.json"
    out.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")) + "\n", "utf-8", newline="")
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    out = write_index()
    print(f"wrote {out.relative_to(CATALOG.parent.parent.parent)}")


if __name__ == "__main__":
    main()
