"""Start-up cost of the catalog, each figure in fresh processes, as a ratio to one cold fit.

Per fresh process (median of RUNS): the time to import ctxbudget, the time to load the bundled
catalog and resolve a first id (a dated Anthropic id),
the time to resolve a Bedrock id after that (the first to need match rules, which compile then), and the cold fit of the example into 32,000
tokens in the same process, which is the work the start-up is compared with.

    python bench/bench_catalog.py build/example.json
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from benchcli import bench_parser

RUNS = 7
PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import ctxbudget
from ctxbudget.catalog.catalog import bundled_catalog
t1 = time.perf_counter()
bundled_catalog().resolve_window("claude-sonnet-4-5-20250929")
t2 = time.perf_counter()
bundled_catalog().resolve_window("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
t3 = time.perf_counter()
body = json.load(open(sys.argv[1]))
t4 = time.perf_counter()
ctxbudget.fit(body, model="gpt-5", max_context_tokens=32000)
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "catalog": t2 - t1, "next": t3 - t2, "fit": t5 - t4}))
"""


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "request", nargs="?", default="build/example.json", help="the example (make build/example.json)"
    )
    example = parser.parse_args().request
    samples = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", PROBE, example], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(RUNS)
    ]
    median = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    fit = median["fit"]
    print(
        f"catalog start-up, {RUNS} fresh processes (median); baseline: one cold fit of the example, {fit * 1e3:.1f} ms"
    )
    rows = (
        ("import ctxbudget", "import"),
        ("load the catalog + first resolution (a dated id)", "catalog"),
        ("a second resolution (Bedrock id: compiles match rules)", "next"),
    )
    for label, key in rows:
        print(f"  {label:<52} {median[key] * 1e3:8.1f} ms  {median[key] / fit:6.2f}x one fit")


if __name__ == "__main__":
    main()
