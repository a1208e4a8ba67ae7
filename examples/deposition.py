"""Print the bundled fit example: a deposition-style review request of about 114,000 tokens.

python examples/deposition.py > build/example.json
"""

from __future__ import annotations

import json
import sys

from ctxbudget.simulation.deposition import build_fit_example

if __name__ == "__main__":
    json.dump(build_fit_example(), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
