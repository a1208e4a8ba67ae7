"""Tiered assembly benchmark, as ratios to one tiktoken pass over the same text (same run).

The bundled legal example: a 15k-token (estimated) pinned playbook, protected testimony, a
95k-token (estimated) transcript reduced to the compact tier's ceiling, and a short conversation,
assembled for claude-sonnet-4-5 under the ``legal-review`` policy. Cold: caches cleared first.
Warm: the same request again with counts cached. Also a second turn with ``--previous``, and the
bundled 10-turn simulation sent through the gateway to the billing upstream: its wall time per
turn against the floor, the billed cache share, the ledger's cut and the p95 end-to-end latency
(modelled upstream time plus the measured assembly and gateway time) against the spec's 4,500 ms.

    python bench/bench_assemble.py build/legal_context.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_fit import median_seconds  # the same timing loop (bench/ is on sys.path when run)

from ctxbudget import assemble, clear_caches, get_encoding, get_policy
from ctxbudget.simulation.runner import run_simulation
from ctxbudget.simulation.scenario import bundled_scenario

REPEATS = 9


def median_ms(action: Callable[[], Any], before: Callable[[], Any] | None = None) -> float:
    return median_seconds(action, before=before, repeats=REPEATS) * 1000


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "build/legal_context.json")
    request = json.loads(path.read_text("utf-8"))
    text = "\n".join(item["text"] for item in request["items"])
    tk = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    tokens = len(tk.encode_ordinary(text))
    policy = get_policy("legal-review")

    def run(previous: Any = None) -> Any:
        return assemble(request, policy=policy, model="claude-sonnet-4-5", previous=previous)

    floor = median_ms(lambda: tk.encode_ordinary(text))
    cold = median_ms(run, before=clear_caches)
    first = run()
    warm = median_ms(run)
    second = median_ms(lambda: run(first.report.to_dict()))
    simulations = []
    simulation = median_ms(lambda: simulations.append(run_simulation(bundled_scenario()))) / 10
    print(f"{'benchmark':44} {'median ms':>10} {'x floor':>8}")
    for name, ms in [
        (f"floor: one tiktoken pass ({tokens:,} tokens)", floor),
        ("cold assembly (legal-review, claude-sonnet-4-5)", cold),
        ("warm assembly (counts cached)", warm),
        ("next turn with --previous (counts cached)", second),
        ("simulation, per turn (session, gateway, billing)", simulation),
    ]:
        print(f"{name:44} {ms:10.2f} {ms / floor:8.3f}")
    report = first.report.to_dict()
    print(
        f"assembled {report['tokens']:,} of {report['prompt_limit_tokens']:,} tokens; tiers "
        + ", ".join(f"{t['name']} {t['tokens']:,}/{t['ceiling_tokens']:,}" for t in report["tiers"])
        + f"; first turn ${report['cost_usd']:.4f}, next turn ${run(first.report.to_dict()).report.to_dict()['cost_usd']:.4f}"
    )
    summary = simulations[-1].summary
    billed = summary["billed"]
    print(
        f"simulation (billed): turns 2-10 read {billed['cache_hit_ratio']:.1%} from cache; cost mean "
        f"${billed['mean_cost_usd']:.4f}, max ${billed['max_cost_usd']:.4f}; ledger cut {summary['ledger_cut']:.1%}; "
        f"p95 end-to-end {billed['p95_end_to_end_ms']:,.0f} ms of {billed['latency_target_ms']:,.0f} ms"
    )


if __name__ == "__main__":
    main()
