"""Write the request bodies the README's and the docs' commands use, into a folder (``build``).

- ``request.json``: a ``question`` body (a role, documents with retrieval scores, a history);
- ``meeting.txt``: a 40-page deposition transcript, and ``meeting.json``, a question over it as
  one document (``--split-documents`` keeps the passages that answer it);
- ``agent.json``: an OpenAI agent loop (tool calls with long results) with its model and
  ``max_tokens``, as a client sends it.

python examples/readme_bodies.py build
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from ctxbudget.simulation.deposition import TOPICS, playbook, transcript_pages


def request_body(rng: random.Random) -> dict[str, Any]:
    """About 20,000 tokens in the seed node's ``question`` format."""
    pages = transcript_pages(rng, 24)
    history = []
    for turn, (topic, _) in enumerate(TOPICS, 1):
        history.append({"role": "user", "content": f"What does the record say about {topic}?"})
        history.append(
            {"role": "assistant", "content": f"Turn {turn}: the witness discussed {topic} at length."}
        )
    return {
        "role": playbook(rng),
        "questions": [{"text": "When was the first written notice about the Model K press given?"}],
        "documents": [
            {"page_content": text, "score": round(0.95 - 0.02 * i, 2), "metadata": {"page": i + 1}}
            for i, text in enumerate(pages)
        ],
        "history": history,
    }


def meeting_body(transcript: str) -> dict[str, Any]:
    """The transcript as one document under one question."""
    return {
        "questions": [{"text": "When was the first written notice about the warranty given?"}],
        "documents": [{"page_content": transcript, "metadata": {"source": "meeting"}}],
    }


def agent_body(rng: random.Random) -> dict[str, Any]:
    """An OpenAI Chat Completions agent loop of about 50,000 tokens: each search call answered by a
    page range of the transcript."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You review deposition records. Cite page:line."},
        {"role": "user", "content": "Build a timeline of the notices given about the Model K press."},
    ]
    for n, (topic, _) in enumerate(TOPICS):
        call = f"call_{n:02d}"
        arguments = json.dumps({"query": topic, "pages": 12})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "search", "arguments": arguments}}
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call, "content": "\n".join(transcript_pages(rng, 12))}
        )
    messages.append({"role": "user", "content": "Now list the notices in date order."})
    search = {
        "name": "search",
        "description": "Search the deposition record.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "pages": {"type": "integer"}},
            "required": ["query"],
        },
    }
    return {
        "model": "gpt-4o",
        "max_tokens": 1000,
        "tools": [{"type": "function", "function": search}],
        "messages": messages,
    }


def write_bodies(folder: Path) -> list[Path]:
    """Write the four files (the same bytes every run) and return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    transcript = "\n".join(transcript_pages(random.Random(7), 40))
    files = {
        "request.json": request_body(random.Random(20261201)),
        "meeting.json": meeting_body(transcript),
        "agent.json": agent_body(random.Random(11)),
    }
    written = []
    for name, body in files.items():
        path = folder / name
        path.write_text(json.dumps(body, indent=1) + "\n", "utf-8")
        written.append(path)
    (folder / "meeting.txt").write_text(transcript + "\n", "utf-8")
    return [*written, folder / "meeting.txt"]


if __name__ == "__main__":
    for path in write_bodies(Path(sys.argv[1] if len(sys.argv) > 1 else "build")):
        print(path)
