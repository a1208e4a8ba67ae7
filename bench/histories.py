"""The chat history the fit benchmarks trim, in a module that imports nothing of ctxbudget: a
fresh process that loads it has loaded no more of the library than a user's program would
(bench_history.py times the library's first call)."""

from __future__ import annotations

from typing import Any

MODEL = "gpt-5"


def chat_history(n: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append(
            {
                "role": role,
                "content": f"Message {i}: the deposition of witness {i % 7} covered "
                f"exhibit EX-{i % 40:02d} and the notice letter dated March {i % 28 + 1}.",
            }
        )
    messages.append({"role": "user", "content": "What was the latest exhibit discussed?"})
    return {"model": MODEL, "messages": messages}
