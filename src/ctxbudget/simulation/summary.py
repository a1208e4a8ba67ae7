"""Writing a simulation's outputs: turns.json, summary.json, chart.png and requests/turn-NN.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .runner import SimulationResult

__all__ = ["check_chart", "write_chart", "write_outputs"]


_TURN_FILE = re.compile(r"turn-\d{2,}\.json")


def write_outputs(result: SimulationResult, folder: str | Path) -> list[Path]:
    """Write ``turns.json``, ``summary.json`` (with the strategy comparison), ``chart.png`` and
    each turn's request body as sent (``requests/turn-NN.json``, an earlier run's left there
    removed: a 30-turn run's turn-30.json stood beside a 2-turn run's); nothing when the chart
    cannot be drawn (:func:`check_chart`)."""
    check_chart()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    turns = out / "turns.json"
    summary = out / "summary.json"
    turns.write_text(json.dumps(result.turns, indent=1) + "\n", "utf-8")
    summary.write_text(
        json.dumps({**result.summary, "strategies": result.strategies}, indent=1) + "\n", "utf-8"
    )
    chart = write_chart(result.turns, out / "chart.png")
    requests = out / "requests"
    requests.mkdir(exist_ok=True)
    for stale in requests.glob("turn-*.json"):  # an earlier run's turns past this run's last
        if _TURN_FILE.fullmatch(stale.name):
            stale.unlink()
    bodies = []
    for n, body in enumerate(result.requests, 1):
        path = requests / f"turn-{n:02d}.json"
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", "utf-8")
        bodies.append(path)
    return [turns, summary, chart, *bodies]


_NO_CHART = "chart.png needs matplotlib: pip install 'ctxbudget[chart]' (in a source checkout: pip install -e '.[chart]')"


def check_chart() -> None:
    """A ConfigError naming the extra when matplotlib is not installed: what a caller checks
    before a simulation whose outputs include the chart, not after it ran."""
    try:
        import matplotlib  # noqa: F401 - present, or the extra is missing
    except ImportError as exc:
        raise ConfigError(_NO_CHART) from exc


def write_chart(turns: list[dict[str, Any]], path: Path) -> Path:
    """Tokens by tier per turn (stacked bars) and cost per turn (line, right axis)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError(_NO_CHART) from exc
    names = [*turns[0]["tiers"], "current turn"] if turns else []
    x = [t["turn"] for t in turns]
    figure, left = plt.subplots(figsize=(9, 4.5), dpi=100)
    bottom = [0] * len(turns)
    for name in names:
        values = [
            t["tiers"].get(name, t["current_turn_tokens"] if name == "current turn" else 0) for t in turns
        ]
        left.bar(x, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    left.set_xlabel("turn")
    left.set_ylabel("input tokens")
    left.set_xticks(x)
    right = left.twinx()
    right.plot(x, [t["cost_usd"] for t in turns], color="black", marker="o", label="cost (USD)")
    right.set_ylabel("cost per turn (USD)")
    left.legend(loc="upper center", bbox_to_anchor=(0.45, -0.13), ncol=len(names), fontsize=8)
    right.legend(loc="upper right", fontsize=8)
    left.set_title("Tokens by tier and cost per turn")
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
    return path
