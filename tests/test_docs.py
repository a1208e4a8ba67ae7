"""The README's Python example runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), flags=re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_gateway_doc_python_blocks_run_against_a_local_gateway(tmp_path: Path, monkeypatch: Any) -> None:
    """docs/gateway.md's SDK snippets, run as written against a gateway over the fake upstream
    (its address put where the docs say 127.0.0.1:8787)."""
    from .fake_upstream import gateway_over_fake

    doc = (README.parent / "docs" / "gateway.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert len(blocks) >= 2
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
    with gateway_over_fake(tmp_path / "docs.db") as (fake, url):
        namespace: dict[str, Any] = {}
        for block in blocks:
            exec(compile(block.replace("http://127.0.0.1:8787", url), "docs/gateway.md", "exec"), namespace)
        assert fake.received, "the snippets reached the upstream through the gateway"


def test_responses_doc_python_blocks_run(tmp_path: Path, monkeypatch: Any) -> None:
    """docs/responses.md's library example and SDK snippet, run as written (the SDK's against a
    gateway over the fake upstream, its address put where the page says 127.0.0.1:8787)."""
    from .fake_upstream import gateway_over_fake

    doc = (README.parent / "docs" / "responses.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert len(blocks) == 2
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
    exec(compile(blocks[0], "docs/responses.md", "exec"), {})
    with gateway_over_fake(tmp_path / "docs.db") as (fake, url):
        exec(compile(blocks[1].replace("http://127.0.0.1:8787", url), "docs/responses.md", "exec"), {})
        assert fake.paths == ["/v1/responses", "/v1/responses"]


def test_counting_langchain_and_caching_docs_python_blocks_run() -> None:
    for name in ("counting.md", "langchain.md", "caching.md"):
        doc = (README.parent / "docs" / name).read_text("utf-8")
        blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
        assert blocks, name
        for block in blocks:
            exec(compile(block, f"docs/{name}", "exec"), {})


def test_the_langchain_doc_prints_what_its_comments_show() -> None:
    # A comment after a print that holds no "..." is the line it prints (they went stale once).
    doc = (README.parent / "docs" / "langchain.md").read_text("utf-8")
    block = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)[0]
    shown = [m[1].strip() for m in re.finditer(r"^print\(.*\)\s+#(.*)$", block, flags=re.MULTILINE)]
    shown = [line for line in shown if "..." not in line]
    assert len(shown) >= 2
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "docs/langchain.md", "exec"), {})
    assert out.getvalue().splitlines()[: len(shown)] == shown


def test_transport_doc_python_blocks_run(monkeypatch: Any) -> None:
    """docs/transport.md's two examples, run as written against the fake upstream (its address put
    where the page has the provider's, and in the SDKs' environment variables)."""
    from .fake_upstream import FakeUpstream, Served

    doc = (README.parent / "docs" / "transport.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert len(blocks) == 2
    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
        monkeypatch.setenv("OPENAI_BASE_URL", upstream.url + "/v1")
        exec(
            compile(
                blocks[0].replace("https://api.anthropic.com", upstream.url), "docs/transport.md", "exec"
            ),
            {},
        )
        exec(compile(blocks[1], "docs/transport.md", "exec"), {"__name__": "docs"})
    assert fake.paths == ["/v1/messages", "/v1/chat/completions"]
    assert len(fake.received[0]["messages"]) < 21  # the history was fitted


def test_readme_commands_run_on_the_bodies_make_demo_writes(tmp_path: Path, monkeypatch: Any) -> None:
    """Every `count`, `fit`, `models` and `assemble` line of the README's "Use it" block, run as
    written (comments and redirections aside) on the bodies `make demo` writes to build/ (here
    written to a folder of the test's own): each ends with exit 0. docs/retention.md's example
    reads build/meeting.txt from there too."""
    import shlex
    import subprocess
    import sys

    from click.testing import CliRunner

    from ctxbudget.cli import main

    root = README.parent
    build = tmp_path / "build"
    subprocess.run([sys.executable, str(root / "examples" / "readme_bodies.py"), str(build)], check=True)
    for script, name in (("deposition.py", "example.json"), ("legal_context.py", "legal_context.json")):
        made = subprocess.run(
            [sys.executable, str(root / "examples" / script)], check=True, capture_output=True
        )
        (build / name).write_bytes(made.stdout)
    block = re.search(r"## Use it\n\n```sh\n(.*?)```", README.read_text("utf-8"), flags=re.DOTALL)
    assert block is not None
    ran = 0
    for line in block.group(1).splitlines():
        words = shlex.split(line.split("#", 1)[0].split(">", 1)[0])
        if words[1] not in ("count", "fit", "models", "assemble"):
            continue  # simulate and serve need extras (and serve does not end)
        args = [w.replace("build/", f"{build}/") for w in words[1:]]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (line, result.output[-500:])
        ran += 1
    assert ran >= 8
    monkeypatch.chdir(tmp_path)
    retention = re.findall(
        r"```python\n(.*?)```", (root / "docs" / "retention.md").read_text("utf-8"), re.DOTALL
    )
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(retention[0], "docs/retention.md", "exec"), {})
    assert "1:01" in printed.getvalue()  # citations of the passages kept
