"""Print the bundled tiered context request for the legal review agent (policy ``legal-review``).

python examples/legal_context.py > build/legal_context.json
"""

from __future__ import annotations

import json
import sys

from ctxbudget.simulation.deposition import build_legal_context

if __name__ == "__main__":
    json.dump(build_legal_context(), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
