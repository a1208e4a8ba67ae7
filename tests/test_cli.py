from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ctxbudget
from ctxbudget.cli import main
from ctxbudget.session.store import SQLiteStore

REQUEST = {
    "role": "Be precise. " * 300,
    "questions": [{"text": "What happened?"}],
    "documents": [{"page_content": "Doc text. " * 50, "score": 0.5}],
}


def _write(tmp_path: Path, body: object) -> str:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_fit_json_prints_request_and_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "fit",
            _write(tmp_path, REQUEST),
            "--model",
            "gpt-4o",
            "--max-context-tokens",
            "500",
            "--reserve-output-tokens",
            "0",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert set(payload) == {"request", "report"}
    assert payload["report"]["tokens_after"] <= 500


def test_fit_reads_stdin_and_prints_a_table() -> None:
    result = CliRunner().invoke(
        main,
        [
            "fit",
            "-",
            "--model",
            "gpt-4o",
            "--max-context-tokens",
            "500",
            "--reserve-output-tokens",
            "100",
            "--budget",
            "system=20,query=20,documents=40,history=20",
        ],
        input=json.dumps(REQUEST),
    )
    assert result.exit_code == 0, result.output
    assert "documents" in result.output and "trimmed" in result.output


def test_count_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["count", _write(tmp_path, REQUEST), "--model", "gpt-5", "--json"])
    payload = json.loads(result.output)
    assert payload["tokens"] == ctxbudget.count(REQUEST, model="gpt-5")["tokens"]
    assert payload["exact"] is True and payload["encoding"] == "o200k_base" and payload["model"] == "gpt-5"


def test_count_says_why_an_exact_tokenizer_gave_an_estimate(tmp_path: Path) -> None:
    # "estimate (x1 safety factor)" gave no reason: a tool call's framing is not published
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "Look it up."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    }
    result = CliRunner().invoke(main, ["count", _write(tmp_path, body), "--model", "gpt-4o"])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("(o200k_base, exact but for 1 estimated part: --json lists them)\n")
    claude = CliRunner().invoke(main, ["count", _write(tmp_path, body), "--model", "claude-sonnet-4-5"])
    assert "(x1.3 safety factor)" in claude.output


def test_bad_json_exits_2_with_location(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"questions": [')
    result = CliRunner().invoke(main, ["fit", str(path), "--model", "gpt-4o"])
    assert result.exit_code == 2
    assert "line 1" in result.output


def test_wrong_field_exits_2_naming_the_path(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["count", _write(tmp_path, {"questions": [{"text": 3}]}), "--model", "gpt-4o"]
    )
    assert result.exit_code == 2
    assert "$.questions[0].text" in result.output


def test_cannot_fit_exits_3(tmp_path: Path) -> None:
    body = {"questions": [{"text": "q"}], "goals": ["goal " * 400]}
    result = CliRunner().invoke(
        main,
        [
            "fit",
            _write(tmp_path, body),
            "--model",
            "gpt-4o",
            "--max-context-tokens",
            "100",
            "--reserve-output-tokens",
            "0",
        ],
    )
    assert result.exit_code == 3
    assert "goals" in result.output


def test_models_json_lists_the_catalog() -> None:
    result = CliRunner().invoke(main, ["models", "--json"])
    payload = json.loads(result.output)
    assert {m["id"] for m in payload["models"]} >= {"gpt-5", "claude-sonnet-4-5", "gemini-2.5-pro"}
    assert payload["aliases"]["claude-sonnet"] == "claude-sonnet-4-6"
    # an alias that is also an id never applies unscoped (gpt-4o-2024-05-13 is its own entry, at
    # twice gpt-4o's prices): it was listed as gpt-4o's
    ids = {m["id"].lower() for m in payload["models"]}
    assert "gpt-4o-2024-05-13" in ids and "gpt-4o-2024-05-13" not in payload["aliases"]
    # and one that is another provider's id but resolves by the alias (openai's own) is listed
    assert payload["aliases"]["gpt-4-1106-preview"] == "gpt-4-turbo" and "gpt-4-1106-preview" in ids


def test_catalog_env_var(tmp_path: Path) -> None:
    """Several paths are split as PATH is (os.pathsep), so a path may hold a space."""
    paths = []
    for name in ("house", "shed"):
        path = tmp_path / f"a folder {name}" / "c.toml"
        path.parent.mkdir()
        path.write_text(
            f'schema_version = 1\n[[models]]\nid = "{name}"\nprovider = "me"\ncontext_window = 900\n'
            'max_output_tokens = 100\ntokenizer = { encoding = "o200k_base", exact = true }\n'
            "prices = { input = 1, output = 1, cache_write_5m = 1, cache_write_1h = 1, cache_read = 1 }\n"
            'cache = { mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }\n'
        )
        paths.append(str(path))
    # empty entries (a leading, doubled or trailing separator) name no file, as in PATH
    env = {"CTXBUDGET_CATALOG": os.pathsep + os.pathsep.join([paths[0], "", paths[1]]) + os.pathsep}
    result = CliRunner().invoke(main, ["models", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert {"house", "shed"} <= {m["id"] for m in json.loads(result.output)["models"]}


def test_count_holds_back_the_reply_it_is_given(tmp_path: Path) -> None:
    """count --reserve-output-tokens answers as fit would with that reserve, and says why not."""
    path = _write(tmp_path, REQUEST)
    tokens = json.loads(CliRunner().invoke(main, ["count", path, "--model", "gpt-4o", "--json"]).output)[
        "tokens"
    ]
    window = ["--model", "gpt-4o", "--max-context-tokens", str(tokens + 100)]
    plain = CliRunner().invoke(main, ["count", path, *window])
    assert plain.exit_code == 0 and "does not fit" not in plain.output
    held = CliRunner().invoke(main, ["count", path, *window, "--reserve-output-tokens", "101"])
    assert held.exit_code == 0, held.output
    assert (
        f"over the {tokens - 1:,} tokens available" in held.output
        and "less the 101-token reply" in held.output
    )
    bad = CliRunner().invoke(main, ["count", path, *window, "--reserve-output-tokens", "-1"])
    assert bad.exit_code == 2 and "--reserve-output-tokens" in bad.output


def test_an_endless_or_huge_input_is_refused_not_read_to_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fit /dev/zero` read until the kernel killed it (24 GB): a NUL ends the read (JSON text
    holds none), and past the most the command reads it stops with one line."""
    import ctxbudget.cli.base as base

    if Path("/dev/zero").exists():
        zeros = CliRunner().invoke(main, ["fit", "/dev/zero", "--model", "gpt-4o"])
        assert zeros.exit_code == 2 and "not valid JSON" in zeros.output
    monkeypatch.setattr(base, "MAX_INPUT_BYTES", 1024 * 1024)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (3 * 1024 * 1024) + b"{}")
    refused = CliRunner().invoke(main, ["count", str(big), "--model", "gpt-4o"])
    assert refused.exit_code == 2 and "over 1 MiB, the most the command reads" in refused.output
    piped = CliRunner().invoke(main, ["count", "-", "--model", "gpt-4o"], input=b" " * (3 * 1024 * 1024))
    assert piped.exit_code == 2 and "stdin is over 1 MiB" in piped.output


@pytest.mark.parametrize(
    ("body", "kind"), [([1, 2], "an array"), ("hello", "a string"), (None, "null"), (42, "a number")]
)
def test_a_body_that_is_no_object_is_told_so_with_or_without_a_model(
    tmp_path: Path, body: object, kind: str
) -> None:
    """Without --model it was told "no model: pass --model", and with one, what was wrong."""
    path = _write(tmp_path, body)
    for extra in ([], ["--model", "gpt-4o"]):
        result = CliRunner().invoke(main, ["count", path, *extra])
        assert result.exit_code == 2 and f"must be a JSON object, got {kind}" in result.output, extra


def test_a_bad_value_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    """CTXBUDGET_UNKNOWN_MODEL=bogus is the user's variable, not an option they gave: the error
    names it (and the option it stands for); the same value given as the option names the option."""
    path = _write(tmp_path, REQUEST)
    from_env = CliRunner().invoke(main, ["count", path], env={"CTXBUDGET_UNKNOWN_MODEL": "bogus"})
    assert from_env.exit_code == 2
    assert "environment variable CTXBUDGET_UNKNOWN_MODEL" in from_env.output
    assert "'bogus'" in from_env.output and "--unknown-model" in from_env.output
    given = CliRunner().invoke(main, ["count", path, "--unknown-model", "bogus"])
    assert given.exit_code == 2
    assert "Invalid value for '--unknown-model'" in given.output and "environment" not in given.output
    missing = str(tmp_path / "none.toml")
    catalog = CliRunner().invoke(
        main, ["count", path, "--model", "gpt-4o"], env={"CTXBUDGET_CATALOG": missing}
    )
    assert catalog.exit_code == 2 and "environment variable CTXBUDGET_CATALOG" in catalog.output
    assert f"{missing!r} is no file" in catalog.output


def test_python_dash_m_runs_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxbudget",
            "count",
            _write(tmp_path, REQUEST),
            "--model",
            "gpt-4o",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["exact"] is True


def test_a_count_imports_only_what_it_uses(tmp_path: Path) -> None:
    """Start-up: the CLI imports neither pydantic, rich nor a format before a command runs;
    counting an OpenAI body loads its format alone (not rich, not the other formats) and
    compiles no volatile-value regex."""
    import subprocess
    import sys

    body = _write(tmp_path, {"messages": [{"role": "user", "content": "hi"}]})
    code = f"""
import json, sys
from ctxbudget.cli import main
early = sorted(sys.modules)
sys.argv = ["ctxbudget", "count", {body!r}, "--model", "gpt-4o"]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
from ctxbudget import volatile
compiled = volatile._finders.cache_info().currsize + volatile._pattern.cache_info().currsize
print(json.dumps([early, sorted(sys.modules), compiled]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    printed, report = done.stdout.splitlines()
    assert printed == "8 tokens (o200k_base, exact)"
    early, loaded, compiled = json.loads(report)
    assert not [m for m in early if m.split(".")[0] in ("pydantic", "rich", "tiktoken")]
    assert not {"ctxbudget.formats.openai", "ctxbudget.formats.anthropic"} & set(early)
    assert "ctxbudget.formats.openai" in loaded and not [m for m in loaded if m.split(".")[0] == "rich"]
    others = {"ctxbudget.formats.anthropic", "ctxbudget.formats.responses", "ctxbudget.formats.question"}
    assert not others & set(loaded) and compiled == 0


def test_an_assembly_to_json_imports_only_what_it_uses(tmp_path: Path) -> None:
    """Start-up: ``assemble --json`` with a bundled (TOML) policy loads neither rich (its table
    is not printed), PyYAML (no YAML policy) nor regex (no text beyond ASCII is cut), and leaves
    the heap to the operating system at exit; the table and a YAML policy still load theirs."""
    import subprocess
    import sys

    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: p\nenvelope_tokens: 9000\ntiers:\n"
        "  - {name: pinned, ceiling_tokens: 3000, eviction: never, cached: true}\n"
        "  - {name: chat, ceiling_tokens: 3000, eviction: rolling}\n"
    )
    code = """
import json, sys
from ctxbudget.cli import base, main
sys.argv = ["ctxbudget", "assemble", sys.argv[1], "--model", "claude-sonnet-4-5", *sys.argv[2:]]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(json.dumps([sorted({m.split(".")[0] for m in sys.modules}), base._QUICK_EXIT[0]]), file=sys.stderr)
"""
    runs = {}
    for name, flags in {"json": ["--json"], "table": [], "yaml": ["--json", "--policy", str(policy)]}.items():
        done = subprocess.run(
            [sys.executable, "-c", code, _context(tmp_path), *flags],
            capture_output=True,
            text=True,
            check=True,
        )
        runs[name] = json.loads(done.stderr.splitlines()[-1])
    loaded, quick = runs["json"]
    assert not {"rich", "yaml", "regex"} & set(loaded) and quick is True
    assert "rich" in runs["table"][0] and "yaml" in runs["yaml"][0]


def test_session_new_and_add_close_their_store_and_skip_the_teardown(tmp_path: Path) -> None:
    """Start-up and exit: ``session new`` and ``session add --json`` close the store themselves
    (its write-ahead log checkpointed into the file, none left behind) and then leave the heap
    to the operating system; neither loads rich."""
    import subprocess
    import sys

    base = _write(
        tmp_path, {"items": [{"id": "pin", "tier": "pinned", "kind": "playbook", "text": "Rules."}]}
    )
    store = tmp_path / "s.db"
    code = """
import json, sys
from ctxbudget.cli import base, main
sys.argv = ["ctxbudget", "session", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(json.dumps(["rich" in sys.modules, base._QUICK_EXIT[0]]), file=sys.stderr)
"""
    commands = (
        ["new", "s", "--base", base, "--model", "claude-sonnet-4-5", "--store", str(store)],
        ["add", "s", "--question", "When was notice given?", "--store", str(store), "--json"],
    )
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-c", code, *command], capture_output=True, text=True, check=True
        )
        assert json.loads(done.stderr.splitlines()[-1]) == [False, True], command
        assert not (tmp_path / "s.db-wal").exists()
    shown = CliRunner().invoke(main, ["session", "show", "s", "--store", str(store), "--json"])
    assert [t["question"] for t in json.loads(shown.stdout)["turns"]] == ["When was notice given?"]


_INTERRUPTED = """
import io, sys
from ctxbudget.cli import main

class Interrupted(io.BytesIO):
    # a terminal's stream when Ctrl-C is pressed while it is read or written
    def read(self, *args):
        raise KeyboardInterrupt
    read1 = readline = read
    def readinto(self, *args):
        raise KeyboardInterrupt
    def write(self, data):
        raise KeyboardInterrupt

stream = io.TextIOWrapper(Interrupted(), encoding="utf-8", write_through=True)
if sys.argv[1] == "stdin":
    sys.stdin = stream
else:
    sys.stdout = stream
main(sys.argv[2:])
"""


# Ctrl-C pressed while SQLite commits the turn: Python raises the interrupt once the COMMIT
# returns, at the next line its caller runs (here, as the transaction's generator returns).
_INTERRUPTED_AT_COMMIT = """
import linecache, sys
from ctxbudget.cli import main

committed = []

def local(frame, event, arg):
    if event == "line" and linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() == 'db.execute("COMMIT")':
        committed.append(frame.f_lineno)
    elif event == "return" and committed and len(committed) == 1:
        committed.append(0)
        raise KeyboardInterrupt
    return local

def tracer(frame, event, arg):
    if frame.f_code.co_name == "transaction" and frame.f_code.co_filename.endswith("_sqlite_file.py"):
        return local
    return None

sys.settrace(tracer)
main(sys.argv[1:])
"""


def test_ctrl_c_ends_with_130_and_a_stored_turn_says_so(tmp_path: Path) -> None:
    """Ctrl-C is exit 130 (1 is a broken invariant); pressed once ``session add`` stored its turn,
    the message says the turn was stored (told only "aborted", a user added it twice)."""
    import subprocess
    import sys

    def run(where: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _INTERRUPTED, where, *args], capture_output=True, text=True
        )

    reading = run("stdin", "assemble", "-", "--model", "claude-sonnet-4-5")
    assert (reading.returncode, reading.stderr.splitlines()[-1]) == (130, "ctxbudget: aborted")
    base = _write(
        tmp_path, {"items": [{"id": "pin", "tier": "pinned", "kind": "playbook", "text": "Rules."}]}
    )
    store = str(tmp_path / "s.db")
    made = ["session", "new", "s", "--base", base, "--model", "claude-sonnet-4-5", "--store", store]
    assert CliRunner().invoke(main, made).exit_code == 0
    added = run("stdout", "session", "add", "s", "--question", "When?", "--store", store, "--json")
    said = "ctxbudget: interrupted once turn 1 of session 's' was stored: do not add it again (`session show` lists it)"
    assert (added.returncode, added.stderr.splitlines()[-1]) == (130, said)
    at_commit = subprocess.run(
        [
            sys.executable,
            "-c",
            _INTERRUPTED_AT_COMMIT,
            "session",
            "add",
            "s",
            "--question",
            "And?",
            "--store",
            store,
        ],
        capture_output=True,
        text=True,
    )
    said = said.replace("turn 1", "turn 2")
    assert (at_commit.returncode, at_commit.stderr.splitlines()[-1]) == (130, said)
    shown = CliRunner().invoke(main, ["session", "show", "s", "--store", store, "--json"])
    assert [t["question"] for t in json.loads(shown.stdout)["turns"]] == ["When?", "And?"]


_INTERRUPTED_IMPORT = """
import importlib.abc, sys

STOPPED = sys.argv.pop(1)

class Interrupting(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == STOPPED:  # Ctrl-C as the command's modules load
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupting())
from ctxbudget.__main__ import main
main()
"""


@pytest.mark.parametrize("module", ["click", "ctxbudget.cli.base", "ctxbudget.cli.assemble_commands"])
def test_ctrl_c_while_the_command_is_still_loading_is_one_line_and_130(module: str) -> None:
    """Ctrl-C in a command's first 50-300 ms stops the import of its modules: as any other
    Ctrl-C, one line and exit 130, not Python's traceback of the import it stopped (the entry
    point imports the command line inside its own handler)."""
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, module, "assemble", "-", "--model", "gpt-4o"],
        capture_output=True,
        text=True,
        input="{}",
    )
    assert (done.returncode, done.stderr, done.stdout) == (130, "\nctxbudget: aborted\n", "")


def _context(tmp_path: Path, pinned: str = "Rules: cite page:line.") -> str:
    body = {
        "items": [
            {"id": "pin", "tier": "pinned", "kind": "playbook", "text": pinned},
            {"id": "q", "kind": "question", "text": "When was notice given?"},
        ]
    }
    return _write(tmp_path, body)


@pytest.mark.parametrize("command", ["count", "fit"])
def test_a_blank_model_option_is_refused_not_taken_for_none(tmp_path: Path, command: str) -> None:
    """``--model ""`` was taken for no option: the body's model was budgeted in silence (and, with
    none in the body, "pass --model" was said to a user who had)."""
    body = _write(tmp_path, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    for blank in ("", "  "):
        done = CliRunner().invoke(main, [command, body, "--model", blank])
        assert done.exit_code == 2
        assert done.stderr == f"ctxbudget: --model is blank ({blank!r}): name the model the request is for\n"


def test_a_previous_turn_file_of_null_is_refused_not_taken_for_no_previous_turn(tmp_path: Path) -> None:
    """``--previous`` of a file holding ``null`` (a pipeline's empty jq result) was no previous
    turn: a changed pinned prefix passed INV-CTX-01 with exit 0. It is bad input, as ``[]`` is."""
    runner = CliRunner()
    first = runner.invoke(main, ["assemble", _context(tmp_path), "--model", "claude-sonnet-4-5", "--json"])
    assert first.exit_code == 0, first.output
    before, empty = tmp_path / "t1.json", tmp_path / "null.json"
    before.write_text(first.stdout, encoding="utf-8")
    empty.write_text("null\n", encoding="utf-8")
    changed = _context(tmp_path, "Rules v2: cite page:line.")
    told = runner.invoke(
        main, ["assemble", changed, "--model", "claude-sonnet-4-5", "--previous", str(before)]
    )
    assert told.exit_code == 5, told.output
    refused = runner.invoke(
        main, ["assemble", changed, "--model", "claude-sonnet-4-5", "--previous", str(empty)]
    )
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"ctxbudget: {empty}: $: expected the previous turn's `assemble --json` output, got null "
        "(without a previous turn, leave --previous out)\n"
    )


def test_assemble_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["assemble", _context(tmp_path), "--model", "claude-sonnet-4-5", "--json"])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)["report"]  # its warnings go to stderr
    assert {"tiers", "breakpoints", "cache", "cost_usd", "invariants"} <= set(report)
    volatile = runner.invoke(
        main, ["assemble", _context(tmp_path, "Built 2026-11-29T10:00:00Z"), "--model", "gpt-4o"]
    )
    assert volatile.exit_code == 2 and "timestamp" in volatile.output
    big = runner.invoke(main, ["assemble", _context(tmp_path, "Rule. " * 20000), "--model", "gpt-4o"])
    assert big.exit_code == 3 and "pinned" in big.output
    costly = runner.invoke(
        main, ["assemble", _context(tmp_path), "--model", "gpt-4o", "--cost-ceiling", "0.0001"]
    )
    assert costly.exit_code == 4 and "ceiling" in costly.output


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--prompt-cache-key", "abc"],
            "--prompt-cache-key is written only into an OpenAI body: it needs --format openai",
        ),
        (["--prompt-cache-key", "abc", "--format", "anthropic"], "it needs --format openai"),
        (
            ["--idle-seconds", "5"],
            "--idle-seconds says how long ago the previous turn was: it needs --previous",
        ),
    ],
)
def test_assemble_refuses_a_flag_it_would_ignore(tmp_path: Path, flags: list[str], said: str) -> None:
    # the key was dropped from an Anthropic body, and the idle time had no previous turn to expire
    result = CliRunner().invoke(
        main, ["assemble", _context(tmp_path), "--model", "claude-sonnet-4-5", *flags]
    )
    assert result.exit_code == 2 and said in result.stderr and not result.stdout, result.output
    assert len(result.stderr.splitlines()) == 1


def test_assemble_writes_the_prompt_cache_key_with_format_openai(tmp_path: Path) -> None:
    flags = ["--model", "gpt-4o", "--format", "openai", "--prompt-cache-key", "abc"]
    result = CliRunner().invoke(main, ["assemble", _context(tmp_path), *flags])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["prompt_cache_key"] == "abc"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            ["count", "{request}", "--reserve-output-tokens", "9" * 23],
            "--reserve-output-tokens must be a whole number",
        ),
        (
            ["assemble", "{context}", "--expected-output-tokens", "9" * 20],
            "--expected-output-tokens must be a whole",
        ),
        (["assemble", "{context}", "--cost-ceiling", "1e30"], "--cost-ceiling must be a number"),
        (
            ["assemble", "{context}", "--previous", "{context}", "--idle-seconds", "nan"],
            "Invalid value for '--idle-seconds': 'nan' is not",
        ),
    ],
)
def test_a_bad_option_is_named_by_its_flag(tmp_path: Path, command: list[str], said: str) -> None:
    # the library's checks named its parameters (reserve_output_tokens=...), and nan got past
    # --idle-seconds' parsing to be told as idle_seconds: no one types those on the command line
    (tmp_path / "request.json").write_text(json.dumps(REQUEST))
    files = {"{request}": str(tmp_path / "request.json"), "{context}": _context(tmp_path)}
    result = CliRunner().invoke(main, [*(files.get(a, a) for a in command), "--model", "gpt-4o"])
    assert result.exit_code == 2 and f"ctxbudget: {said}" in result.stderr, result.output
    assert not any(name in result.stderr for name in ("_tokens", "idle_seconds", "_usd"))


def test_session_add_refuses_a_nan_idle_time_by_its_flag(tmp_path: Path) -> None:
    add = [
        "session",
        "add",
        "s",
        "--question",
        "q",
        "--idle-seconds",
        "nan",
        "--store",
        str(tmp_path / "s.db"),
    ]
    result = CliRunner().invoke(main, add)
    assert result.exit_code == 2 and "'--idle-seconds': 'nan' is not a finite number" in result.stderr, (
        result.output
    )


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            ["--anthropic-upstream", "ftp://x"],
            {},
            "--anthropic-upstream (or CTXBUDGET_ANTHROPIC_UPSTREAM) must be",
        ),
        (
            [],
            {"CTXBUDGET_OPENAI_UPSTREAM": "notaurl"},
            "--openai-upstream (or CTXBUDGET_OPENAI_UPSTREAM) must be",
        ),
    ],
)
def test_serve_names_a_bad_upstream_by_its_flag(
    tmp_path: Path, args: list[str], env: dict[str, str], said: str
) -> None:
    pytest.importorskip("uvicorn")
    serve = ["serve", "--port", "1", "--store", str(tmp_path / "gw.db"), *args]
    result = CliRunner(env=env).invoke(main, serve)
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert "_upstream" not in result.stderr


@pytest.mark.parametrize(
    ("command", "said"),
    [
        # the body's own max_tokens wins over the default reserve (fitting.md)
        (["fit"], "[default: the body's max_tokens (or max_completion_tokens, max_output_tokens)"),
        (["serve"], "cannot resolve: refuse the request (400 unknown_model, naming the closest ids)"),
        (["serve"], "never taken from a request) (env CTXBUDGET_ANTHROPIC_UPSTREAM)."),
        (["serve"], "(.../v1beta/openai/) (env CTXBUDGET_OPENAI_UPSTREAM)."),
        (["assemble"], "Exit codes: 1 an invariant broke (the message names it), 2 bad input"),
    ],
)
def test_help_says_what_the_command_does(command: list[str], said: str) -> None:
    # fit's reserve left the body's max_tokens out, serve's --unknown-model said "fail (exit 2)"
    # where the gateway answers 400, its upstreams left their variables out, and assemble's exit
    # codes left 1 out
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert said in " ".join(result.output.split())


def test_verify_prefix(tmp_path: Path) -> None:
    runner = CliRunner()
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(
        json.dumps(
            {"system": [{"type": "text", "text": "same rules", "cache_control": {"type": "ephemeral"}}]}
        )
    )
    b.write_text(a.read_text())
    assert runner.invoke(main, ["verify-prefix", str(a), str(b)]).exit_code == 0
    b.write_text(
        json.dumps(
            {"system": [{"type": "text", "text": "same rulez", "cache_control": {"type": "ephemeral"}}]}
        )
    )
    differs = runner.invoke(main, ["verify-prefix", str(a), str(b)])
    assert differs.exit_code == 1 and "byte 9" in differs.output


def _prefix_check(tmp_path: Path, first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    result = CliRunner().invoke(main, ["verify-prefix", str(a), str(b), "--json"])
    assert result.exit_code in (0, 1), result.output
    checked: dict[str, Any] = json.loads(result.output)
    assert checked["identical"] == (result.exit_code == 0)
    return checked


def test_verify_prefix_reads_tools_and_accepts_a_prefix_that_grew(tmp_path: Path) -> None:
    mark = {"type": "ephemeral"}
    rules = {"type": "text", "text": "same rules", "cache_control": mark}
    tool = {"name": "search", "description": "Search the record.", "input_schema": {"type": "object"}}
    body = {"tools": [tool], "system": [rules], "messages": [{"role": "user", "content": "Q?"}]}
    assert _prefix_check(tmp_path, body, body)["identical"]
    # A changed tool definition is a new prefix: the tools come before the system prompt.
    other_tool = {**tool, "description": "Search the docket."}
    changed = _prefix_check(tmp_path, body, {**body, "tools": [other_tool]})
    assert not changed["identical"] and changed["offset"] < len(json.dumps(tool))
    # A second marked system block after the first: the first turn's entry is still read.
    more = {"type": "text", "text": "case notes", "cache_control": mark}
    grown = _prefix_check(tmp_path, body, {**body, "system": [rules, more]})
    assert grown["identical"] and grown["grown"]
    # The same block with text added at its end is another entry (a breakpoint ends a block).
    longer = _prefix_check(tmp_path, body, {**body, "system": [{**rules, "text": "same rules, more"}]})
    assert not longer["identical"]
    # A shorter prefix than the first's is not a read of it.
    assert not _prefix_check(tmp_path, {**body, "system": [rules, more]}, body)["identical"]
    # OpenAI: the leading system and developer messages, tools first.
    chat = {
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "messages": [
            {"role": "system", "content": "rules"},
            {"role": "developer", "content": "style"},
            {"role": "user", "content": "Q?"},
        ],
    }
    assert _prefix_check(
        tmp_path, chat, {**chat, "messages": [*chat["messages"][:2], {"role": "user", "content": "R?"}]}
    )["identical"]
    style = [chat["messages"][0], {"role": "developer", "content": "terse"}, chat["messages"][2]]
    assert not _prefix_check(tmp_path, chat, {**chat, "messages": style})["identical"]


def test_policies_lists_legal_review() -> None:
    result = CliRunner().invoke(main, ["policies", "--json"])
    legal = json.loads(result.output)[0]
    assert legal["name"] == "legal-review"
    # every setting, not the tiers alone: these decide exit 3 and 4 too (docs/assembly.md's figures)
    assert (legal["ledger_ceiling_tokens"], legal["current_turn_ceiling_tokens"]) == (5000, 2000)
    assert legal["expected_output_tokens"] == 1500 and "history_trigger_tokens" in legal["compaction"]
    assert {t["compact_query"] for t in legal["tiers"]} <= {"question", "tags"}


def test_hints_name_the_flags_on_the_command_line_and_the_options_in_python(tmp_path: Path) -> None:
    import pytest

    body = {"model": "gtp-4o", "messages": [{"role": "user", "content": "Hi"}]}
    result = CliRunner().invoke(main, ["count", _write(tmp_path, body)])
    assert result.exit_code == 2
    assert "--max-context-tokens" in result.output and "--unknown-model floor" in result.output
    assert "--catalog FILE" in result.output and "max_context_tokens=" not in result.output
    with pytest.raises(ctxbudget.UnknownModelError) as caught:
        ctxbudget.count(body, model="gtp-4o")
    assert 'unknown_model="floor"' in str(caught.value) and "--" not in str(caught.value)
    tight = {"model": "gpt-4o", "system": "x " * 6000, "messages": [{"role": "user", "content": "Hi"}]}
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, tight), "--max-context-tokens", "5000"])
    assert result.exit_code == 3 and "--on-overflow empty" in result.output


def test_each_command_names_its_own_flags(tmp_path: Path) -> None:
    import pytest

    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
    flags = ["--max-context-tokens", "10", "--reserve-output-tokens", "10"]
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, chat), *flags])
    assert result.exit_code == 2 and "(--reserve-output-tokens)" in result.output
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"model": "gpt-4o", "prompt": "Hi"}))
    result = CliRunner().invoke(main, ["assemble", str(odd), "--model", "gpt-4o"])
    assert result.exit_code == 2 and "--input-format" in result.output  # its --format is the output
    result = CliRunner().invoke(main, ["assemble", str(odd), "--model", "gtp-4o"])
    assert result.exit_code == 2 and "--catalog FILE" in result.output
    assert "--unknown-model" not in result.output and "--max-context-tokens" not in result.output
    with pytest.raises(ctxbudget.UnknownModelError, match="load_catalog") as caught:
        ctxbudget.assemble({"items": []}, policy=ctxbudget.get_policy("legal-review"), model="gtp-4o")
    assert "max_context_tokens" not in str(caught.value)  # an assembly prices the model: no floor


def test_a_ceiling_that_is_not_a_finite_number_is_a_usage_error(tmp_path: Path) -> None:
    for command in (["assemble", _write(tmp_path, REQUEST), "--model", "gpt-4o"], ["serve"]):
        for value in ("nan", "inf", "-1"):
            result = CliRunner().invoke(main, [*command, "--cost-ceiling", value])
            assert result.exit_code == 2 and "--cost-ceiling" in result.output, (command, value)


def test_fit_and_count_refuse_a_body_whose_content_the_format_does_not_read(tmp_path: Path) -> None:
    chat = _write(tmp_path, {"messages": [{"role": "user", "content": "word " * 2000}], "input": "hi"})
    for args in (["fit", "--max-context-tokens", "5000", "--json"], ["count"]):
        for forced in (["--format", "question"], ["--format", "responses"], []):
            result = CliRunner().invoke(main, [args[0], chat, "--model", "gpt-4o", *forced, *args[1:]])
            assert result.exit_code == 2, (args, forced, result.output)
            assert "is not read by the" in result.output or "are not read by the" in result.output
            assert "--format" in result.output and "input_format=" not in result.output


def test_a_group_without_a_command_prints_its_help_and_exits_0() -> None:
    for group in ([], ["session"]):
        result = CliRunner().invoke(main, group)
        assert result.exit_code == 0, result.output
        assert result.stdout == CliRunner().invoke(main, [*group, "--help"]).stdout
        assert result.stdout.startswith("Usage:") and "Commands:" in result.stdout
        assert not result.stderr


def test_fit_count_all_counts_every_text_as_the_library_does(tmp_path: Path) -> None:
    docs = [f"Passage {i}: the witness described exhibit EX-{i} at length. " * 60 for i in range(30)]
    body = {
        "questions": [{"text": "Which exhibit?"}],
        "documents": [{"page_content": d, "score": 1 - i / 100} for i, d in enumerate(docs)],
    }
    args = ["fit", _write(tmp_path, body), "--model", "gpt-4o", "--max-context-tokens", "8000", "--json"]
    lazy, exact = (
        json.loads(CliRunner().invoke(main, [*args, *more]).output) for more in ([], ["--count-all"])
    )
    assert lazy["report"]["uncounted_items"] > 0 and exact["report"]["uncounted_items"] == 0
    assert exact["request"] == lazy["request"]
    library = ctxbudget.fit(body, model="gpt-4o", max_context_tokens=8000, count_all=True)
    assert exact["report"] == library.report.to_dict()
    assert "--count-all" in CliRunner().invoke(main, ["fit", "--help"]).output


def test_json_reports_word_their_warnings_as_the_command_line_does(tmp_path: Path) -> None:
    path = _write(tmp_path, {"messages": [{"role": "user", "content": "When was notice given?"}]})
    for command in ("count", "fit"):
        result = CliRunner().invoke(
            main, [command, path, "--model", "zzz-1", "--unknown-model", "floor", "--json"]
        )
        assert result.exit_code == 0, result.output
        printed = json.loads(result.stdout)
        warnings = printed["warnings"] if command == "count" else printed["report"]["warnings"]
        assert warnings and all("--unknown-model floor" in w for w in warnings), command
        assert not any('unknown_model="floor"' in w or "max_context_tokens=" in w for w in warnings)


def test_count_warns_once_about_the_floor_and_says_when_a_request_does_not_fit(tmp_path: Path) -> None:
    path = _write(tmp_path, {"messages": [{"role": "user", "content": "word " * 900}]})
    floor = CliRunner().invoke(main, ["count", path, "--model", "gtp-4o-once", "--unknown-model", "floor"])
    assert floor.exit_code == 0 and floor.output.count("unknown model 'gtp-4o-once'") == 1
    assert "--unknown-model floor" in floor.output and "unknown_model=" not in floor.output
    over = CliRunner().invoke(main, ["count", path, "--model", "gpt-4o", "--max-context-tokens", "500"])
    assert (
        over.exit_code == 0
        and "over the 500 tokens available (the 500-token window): it does not fit" in over.output
    )
    fits = CliRunner().invoke(main, ["count", path, "--model", "gpt-4o"])
    assert "does not fit" not in fits.output


def _stderr_on_a_terminal(args: list[str]) -> tuple[bytes, bytes]:
    """stdout, and what a terminal attached as stderr was shown, of one CLI run."""
    import os
    import pty
    import select
    import subprocess
    import sys

    master, slave = pty.openpty()
    cli = str(Path(sys.executable).with_name("ctxbudget"))
    process = subprocess.Popen([cli, *args], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        chunk = b""
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
        shown += chunk
        if not chunk and process.poll() is not None:
            break
    os.close(master)
    assert process.stdout is not None
    return process.stdout.read(), shown


def test_a_large_input_shows_a_spinner_on_a_terminal_and_nothing_elsewhere(tmp_path: Path) -> None:
    large = _write(tmp_path, {"messages": [{"role": "user", "content": "word " * 1_800_000}]})  # 9 MB
    out, shown = _stderr_on_a_terminal(["count", large, "--model", "gpt-4o"])
    assert out.startswith(b"1800008 tokens") and b"ctxbudget: counting" in shown
    piped = CliRunner().invoke(main, ["count", large, "--model", "gpt-4o"])  # not a terminal
    (tmp_path / "req.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert (
        b"ctxbudget:"
        not in _stderr_on_a_terminal(["count", str(tmp_path / "req.json"), "--model", "gpt-4o"])[1]
    )
    assert "counting" not in piped.output


def test_a_table_off_a_terminal_is_as_wide_as_its_cells() -> None:
    """A pipe or a log gets every cell whole, whatever width the environment claims (rich cut
    "documents" to "documen…" at its default of 80 columns off a terminal)."""
    args = ["fit", "-", "--model", "gpt-4o", "--max-context-tokens", "500", "--reserve-output-tokens", "100"]
    result = CliRunner(env={"COLUMNS": "40"}).invoke(main, args, input=json.dumps(REQUEST))
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert all(word in result.output for word in ("component", "documents", "truncated", "summarized"))


def test_models_names_a_mistyped_option_and_says_when_nothing_matches() -> None:
    runner = CliRunner()
    for args in (
        ["models", "--jsno"],
        ["models", "claude", "--jsno"],
        ["models", "resolve", "gpt-4o", "--jsno"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and "No such option '--jsno'" in result.output, (args, result.output)
    nothing = runner.invoke(main, ["models", "zzzz"])
    assert nothing.exit_code == 0 and "no model id matches 'zzzz'" in nothing.output
    assert "models resolve zzzz" in nothing.output
    # the hint is a command to paste: quoted, and none for a pattern that does not print
    spaced = runner.invoke(main, ["models", "foo bar*"])
    assert "`ctxbudget models resolve 'foo bar*'`" in spaced.output
    control = runner.invoke(main, ["models", "\x01"])
    assert "no model id matches '\\x01'" in control.output and "\x01" not in control.output


def test_models_resolve_suggests_only_what_it_takes() -> None:
    result = CliRunner().invoke(main, ["models", "resolve", "gtp-4o"])
    assert result.exit_code == 2 and "closest: gpt-4o" in result.output
    assert "--catalog FILE" in result.output
    assert "--max-context-tokens" not in result.output and "--unknown-model" not in result.output


def test_a_body_model_that_is_not_an_id_is_named_as_such() -> None:
    for given, shown in ((42, "got 42"), ("  ", 'got "  "'), (None, "got null")):
        body = {"model": given, "messages": [{"role": "user", "content": "hi"}]}
        result = CliRunner().invoke(main, ["count", "-"], input=json.dumps(body))
        assert result.exit_code == 2 and "$.model" in result.output and shown in result.output, result.output
    absent = CliRunner().invoke(main, ["count", "-"], input=json.dumps({"messages": []}))
    assert absent.exit_code == 2 and 'give the body a "model" field' in absent.output


def test_verify_prefix_refuses_messages_that_are_not_message_objects(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"messages": [{"role": "system", "content": "x"}]}))
    for messages in (["hello"], "abc", {"a": 1}):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"messages": messages}))
        result = CliRunner().invoke(main, ["verify-prefix", str(bad), str(good)])
        assert result.exit_code == 2 and "$.messages" in result.output, result.output


def test_an_empty_prompt_cache_key_is_refused_by_its_flag() -> None:
    result = CliRunner().invoke(
        main, ["assemble", "--model", "gpt-4o", "--prompt-cache-key", "", "-"], input="{}"
    )
    assert result.exit_code == 2 and "'--prompt-cache-key': must not be empty" in result.output, result.output


def test_verify_prefix_names_the_file_that_is_not_a_body(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"messages": [{"role": "system", "content": "x"}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"question": "what?"}))
    for pair in ((bad, good), (good, bad)):
        result = CliRunner().invoke(main, ["verify-prefix", *map(str, pair)])
        assert result.exit_code == 2 and f"{bad}: $: is not a request body" in result.output, result.output
        assert str(good) not in result.output


def test_verify_prefix_reads_an_assembly_rendered_as_text(tmp_path: Path) -> None:
    output = tmp_path / "text.json"
    output.write_text(json.dumps({"request": "Rules.\n\nQuestion?", "report": {}}))
    result = CliRunner().invoke(main, ["verify-prefix", str(output), str(output)])
    assert result.exit_code == 0 and "identical" in result.output, result.output


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"system": 5, "messages": []}, "$.system"),
        ({"system": ["rules"]}, "$.system[0]"),
        ({"request": [1, 2]}, "$.request"),
        ({"report": {"breakpoints": 5}}, "not a request body"),
    ],
)
def test_verify_prefix_refuses_what_is_not_a_request(
    tmp_path: Path, body: dict[str, Any], where: str
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"system": "rules", "messages": []}))
    bad.write_text(json.dumps(body))
    for pair in ((bad, good), (good, bad)):
        result = CliRunner().invoke(main, ["verify-prefix", *map(str, pair)])
        assert result.exit_code == 2 and where in result.output, result.output


def test_assemble_for_a_model_without_prices_prints_its_table(tmp_path: Path) -> None:
    """The table's cost line formatted None: a TypeError traceback after the body was printed
    (and, from `session add`, after the turn was stored, so a retry stored it twice)."""
    catalog = tmp_path / "mine.toml"
    catalog.write_text(
        'schema_version = 1\n[[models]]\nid = "house-llm"\nprovider = "self-hosted"\ncontext_window = 32768\n'
    )
    policy = tmp_path / "one.toml"
    policy.write_text(
        'name = "one"\nenvelope_tokens = 1000\n[[tiers]]\nname = "only"\nceiling_tokens = 500\neviction = "rolling"\n'
    )
    request = tmp_path / "r.json"
    items = [{"id": "h1", "tier": "only", "kind": "history", "role": "user", "text": "hello"}]
    request.write_text(json.dumps({"items": [*items, {"id": "q", "kind": "question", "text": "What now?"}]}))
    args = [
        "assemble",
        str(request),
        "--policy",
        str(policy),
        "--model",
        "house-llm",
        "--catalog",
        str(catalog),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "cost price unknown" in result.output


def test_simulate_refuses_a_server_url_for_its_store_without_echoing_it() -> None:
    """A PostgreSQL URL was taken for an SQLite path, and the error showed its password."""
    result = CliRunner().invoke(main, ["simulate", "--store", "postgresql://u:secretpw@127.0.0.1:1/db"])
    assert result.exit_code == 2 and "secretpw" not in result.output
    assert "give a file, not a URL" in result.output


def test_session_list_never_shows_an_unknown_price_as_zero() -> None:
    """An unpriced session was listed at $0.00 while `session show` said "price unknown"."""
    from ctxbudget.cli.session_commands import _cost_of

    def row(cost: float | None, turns: int, unpriced: int) -> dict[str, Any]:
        return {"cost_usd": cost, "turns": turns, "unpriced_turns": unpriced}

    assert _cost_of(row(None, 1, 1)) == "price unknown"
    assert _cost_of(row(0.75, 3, 1)) == "$0.75 (and 1 turn of unknown price)"
    assert _cost_of(row(0.5, 1, 0)) == "$0.50"
    assert _cost_of(row(None, 0, 0)) == "$0.00"


def test_models_resolve_words_its_warning_with_the_cli_flags(tmp_path: Path) -> None:
    """The warning said "add it with catalog=load_catalog(FILE)", the library's argument."""
    catalog = tmp_path / "c.json"
    catalog.write_text(
        json.dumps(
            {"schema_version": 1, "models": [{"id": "jmodel", "provider": "me", "context_window": 10000}]}
        )
    )
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(
            main, ["models", "resolve", "jmodel-x", "--catalog", str(catalog), *extra]
        )
        assert (
            result.exit_code == 0
            and "--catalog FILE" in result.output
            and "load_catalog" not in result.output
        )


@pytest.mark.parametrize(
    ("scenario", "said"),
    [
        (
            {
                "name": "s",
                "base": {"items": []},
                "turns": [{"question": "Was notice given?"}, {"question": " "}],
            },
            "$.turns[1].question: the question is empty",
        ),
        (
            {
                "name": "s",
                "base": {"messages": [{"role": "user", "content": "x"}]},
                "turns": [{"question": "q"}],
            },
            "$.base.messages: a session base is",
        ),
        (
            {"name": "s", "model": "gpt-99", "base": {"items": []}, "turns": [{"question": "q"}]},
            "$.model: unknown model 'gpt-99'",
        ),
        (  # a number of seconds, not a flag or a string pydantic would read as one
            {"name": "s", "base": {"items": []}, "turns": [{"question": "q", "idle_seconds": True}]},
            "$.turns[0].idle_seconds: Input should be a valid number",
        ),
        (
            {"name": "s", "policy": "nope", "base": {"items": []}, "turns": [{"question": "q"}]},
            "$.policy: unknown policy 'nope'",
        ),
        (  # a turn that cannot fit: exit 3, its place named
            {"name": "s", "base": {"items": []}, "turns": [{"question": "q"}, {"question": "word " * 3_000}]},
            "$.turns[1]: cannot fit",
        ),
    ],
)
def test_a_scenarios_error_names_its_file_and_its_place(
    tmp_path: Path, scenario: dict[str, Any], said: str
) -> None:
    """They said $.items[3].text and $.messages, places of the assembled request, and no file."""
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    result = CliRunner().invoke(main, ["simulate", str(path)])
    code = 3 if "cannot fit" in said else 2
    assert result.exit_code == code and f"{path}: {said}" in result.output, result.output
    if "$.model" in said:  # a model given as an option is the caller's, not the file's
        given = CliRunner().invoke(main, ["simulate", str(path), "--model", "gpt-98"])
        assert given.exit_code == 2 and str(path) not in given.output and "gpt-98" in given.output


def test_a_bad_reply_size_is_written_as_json_and_stdin_is_named_so() -> None:
    body = {"model": "gpt-4o", "max_tokens": True, "messages": [{"role": "user", "content": "hi"}]}
    result = CliRunner().invoke(main, ["count", "-"], input=json.dumps(body))
    assert (
        result.exit_code == 2
        and "$.max_tokens: must be a whole number of tokens >= 0, got true" in result.output
    )
    empty = CliRunner().invoke(main, ["count", "-", "--model", "gpt-4o"], input="")
    assert empty.exit_code == 2 and "ctxbudget: stdin: is empty (no JSON value in it)" in empty.output, (
        empty.output
    )


def test_a_file_that_gives_a_key_twice_is_refused_not_read_as_its_last(tmp_path: Path) -> None:
    """A body whose `messages` came twice was fitted on the second list, the first lost in silence."""
    body = tmp_path / "dup.json"
    body.write_text(
        '{"messages": [{"role": "user", "content": "first"}], "messages": [{"role": "user", "content": "Hi"}]}'
    )
    for command in (["fit", str(body), "--model", "gpt-4o"], ["count", str(body), "--model", "gpt-4o"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2 and "the key 'messages' is given twice" in result.output, command
    nested = tmp_path / "nested.json"
    nested.write_text('{"messages": [{"role": "user", "content": "a", "content": "b"}]}')
    result = CliRunner().invoke(main, ["fit", str(nested), "--model", "gpt-4o"])
    assert result.exit_code == 2 and "'content' is given twice" in result.output


def _cli_process(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, **options: Any) -> Any:
    import sys

    src = str(Path(ctxbudget.__file__).resolve().parent.parent)
    environment = {**os.environ, "PYTHONPATH": src, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        **{"capture_output": True, **options},
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )


def test_a_stdout_that_cannot_write_every_character_gets_escaped_json(tmp_path: Path) -> None:
    """Windows writes redirected output in cp1252: a Japanese body ended in a traceback (exit 1), and
    `session add` had stored its turn before it failed to print it."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "契約はいつ署名されましたか？ 😀"}]}
    (tmp_path / "b.json").write_text(json.dumps(body, ensure_ascii=False), "utf-8")
    done = _cli_process(["fit", "b.json", "--body"], tmp_path, {"PYTHONIOENCODING": "cp1252"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == body and done.stdout.isascii()
    shown = _cli_process(["models", "gpt-4o-mini"], tmp_path, {"PYTHONIOENCODING": "ascii"})
    assert shown.returncode == 0, shown.stderr


@pytest.mark.parametrize("args", [["models"], ["models", "--json"], ["fit", "req.json", "--model", "gpt-4o"]])
def test_a_closed_reader_ends_the_command_quietly_with_exit_0(tmp_path: Path, args: list[str]) -> None:
    # `ctxbudget models | head -1` exited 1, the code of a broken invariant (click's own code for
    # a broken pipe), where the reader had taken what it wanted
    _write(tmp_path, REQUEST)
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first write
    try:
        done = _cli_process(args, tmp_path, capture_output=False, stdout=writer, stderr=subprocess.PIPE)
    finally:
        os.close(writer)
    assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_a_failed_write_to_stdout_names_stdout(tmp_path: Path) -> None:
    # a full disk said "ctxbudget: cannot use: No space left on device", naming nothing
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    _write(tmp_path, REQUEST)
    for mode in (["--body"], ["--json"], []):
        with open("/dev/full", "wb") as full:
            args = ["fit", "req.json", "--model", "gpt-4o", *mode]
            done = _cli_process(args, tmp_path, capture_output=False, stdout=full, stderr=subprocess.PIPE)
        said = "ctxbudget: cannot write the output to stdout: No space left on device\n"
        assert done.returncode == 2 and done.stderr.decode() == said, (mode, done.stderr)


def test_a_closed_stdout_is_a_failed_write_not_a_silent_success(tmp_path: Path) -> None:
    # `ctxbudget fit req.json --json >&-` ended with 0 and its answer went nowhere
    _write(tmp_path, REQUEST)
    for mode in (["--body"], ["--json"], []):
        args = ["fit", "req.json", "--model", "gpt-4o", *mode]
        done = _cli_process(
            args, tmp_path, capture_output=False, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1)
        )
        said = (
            "ctxbudget: cannot write the output to stdout: it is not open (closed when the command started)\n"
        )
        assert done.returncode == 2 and done.stderr.decode() == said, (mode, done.stderr)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_stderr_that_cannot_be_written_is_not_a_broken_invariant(tmp_path: Path) -> None:
    """The report's table to a full stderr: the body is written, and the exit is 2, not the 1 of
    a broken invariant (the failure's own message failed to be written and raised)."""
    import sys

    body = tmp_path / "body.json"
    with body.open("wb") as out, open("/dev/full", "wb") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ctxbudget",
                "assemble",
                _context(tmp_path),
                "--model",
                "claude-sonnet-4-5",
            ],
            stdout=out,
            stderr=full,
        )
    assert done.returncode == 2 and json.loads(body.read_text())["messages"]


def test_the_gateway_serves_without_a_stdout(tmp_path: Path) -> None:
    # started with stdout closed (a daemon's), `serve` ended in a traceback from uvicorn's logging
    # set-up ("Unable to configure formatter 'default'"): its lines go to the null device instead
    import sys
    import time

    import httpx

    from tests.fake_upstream import free_port

    port = free_port()
    src = str(Path(ctxbudget.__file__).resolve().parent.parent)
    server = subprocess.Popen(
        [sys.executable, "-m", "ctxbudget", "serve", "--port", str(port), "--store", str(tmp_path / "gw.db")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": src},
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
    )
    try:
        status = None
        for _ in range(300):
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code
                break
            except httpx.TransportError:
                if server.poll() is not None:
                    break
                time.sleep(0.1)
        assert status == 200, server.stderr.read() if server.poll() is not None else "no answer"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_gateway_worker_does_not_load_the_httpx_command_line(tmp_path: Path) -> None:
    """Start-up: ``import httpx`` imports its own command-line client (rich, pygments), which a
    worker never runs; ``serve`` keeps it out, and the worker answers."""
    import sys

    from tests.fake_upstream import free_port

    code = """
import json, os, sys, threading, time, urllib.request
def watch():
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/healthz", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    print(json.dumps([m for m in ("httpx", "pygments", "rich") if m in sys.modules]), flush=True)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
from ctxbudget.cli import main
main(["serve", "--port", sys.argv[2], "--store", sys.argv[1]])
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "gw.db"), str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == ["httpx"], done.stderr


INFINITE = '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e400}'
SCENARIO = '{"name": "x", "base": {"items": []}, "turns": [{"question": "q", "idle_seconds": 1e400}]}'


@pytest.mark.parametrize(
    ("args", "text", "said"),
    [
        (["fit", "in.json"], INFINITE, "in.json: $.max_tokens: inf is not a JSON number"),
        (["count", "in.json"], INFINITE, "in.json: $.max_tokens: inf is not a JSON number"),
        (["assemble", "in.json", "--model", "gpt-4o"], INFINITE, "in.json: $.max_tokens: inf is not a JSON"),
        (["count", "-"], INFINITE, "stdin: $.max_tokens: inf is not a JSON number"),
        (["simulate", "in.json"], SCENARIO, "in.json: $.turns[0].idle_seconds: inf is not a JSON number"),
    ],
    ids=["fit", "count", "assemble", "stdin", "simulate"],
)
def test_a_value_refused_in_a_file_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], text: str, said: str
) -> None:
    # 1e400 reads as inf, refused by the value check, whose message gave the JSON path alone where
    # every other error of the same file names it first ("sc4.json: $.turns[0]...")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.json").write_text(text)
    result = CliRunner().invoke(main, args, input=text)
    assert result.exit_code == 2 and result.stderr.startswith(f"ctxbudget: {said}"), result.output


def test_a_model_flag_other_than_the_bodys_model_is_warned_of(tmp_path: Path) -> None:
    # fit --model claude-sonnet-4-5 on a gpt-4o body wrote a "ready to send" body still naming
    # gpt-4o, over gpt-4o's window, with exit 0 and no word
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "When was notice given?"}]}
    path = _write(tmp_path, body)
    said = '--model claude-sonnet-4-5 (anthropic/claude-sonnet-4-5) is another model than the body\'s "model": "gpt-4o"'
    runner = CliRunner()
    for command in (["fit", "--body"], ["count"]):
        result = runner.invoke(main, [*command, path, "--model", "claude-sonnet-4-5"])
        assert result.exit_code == 0 and f"ctxbudget: warning: {said}" in result.stderr, result.output
    fitted = runner.invoke(main, ["fit", path, "--model", "claude-sonnet-4-5", "--json"])
    assert any(w.startswith(said) for w in json.loads(fitted.stdout)["report"]["warnings"])
    counted = runner.invoke(main, ["count", path, "--model", "claude-sonnet-4-5", "--json"])
    assert any(w.startswith(said) for w in json.loads(counted.stdout)["warnings"])
    for same in ("gpt-4o-2024-08-06", "openai/gpt-4o", "gpt-4o"):  # ids of the body's own entry
        result = runner.invoke(main, ["fit", "--body", path, "--model", same])
        assert result.exit_code == 0 and "another model" not in result.stderr, (same, result.stderr)
    # one model on another host, measured alike (a review: Bedrock's Claude was "another model")
    claude = _write(tmp_path, {**body, "model": "claude-sonnet-4-5"})
    hosted = runner.invoke(main, ["count", claude, "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"])
    assert hosted.exit_code == 0 and "another model" not in hosted.stderr, hosted.stderr
    # two models measured alike are still two (a review: gpt-4o-mini for a gpt-4o body was silent)
    mini = runner.invoke(main, ["count", path, "--model", "claude-haiku-4-5"])
    assert "another model" in mini.stderr, mini.stderr
    # a snapshot against its -latest name, measured alike: one model (a review)
    latest = _write(tmp_path, {**body, "model": "mistral-large-latest"})
    snapshot = runner.invoke(main, ["count", latest, "--model", "mistral-large-2512"])
    assert "another model" not in snapshot.stderr, snapshot.stderr


def test_a_closed_stdin_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _cli_process(
        ["fit", "-", "--model", "gpt-4o"],
        tmp_path,
        stdin=None,
        pass_fds=(),
        close_fds=True,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.decode().strip()
        == "ctxbudget: cannot read stdin: it is closed (give the input's FILE instead)"
    )


def test_a_terminal_on_stdin_is_told_what_is_awaited(tmp_path: Path) -> None:
    """`fit --model gpt-4o` with no FILE waited on a terminal in silence: it says it reads stdin
    (on a terminal only: a pipe's reader knows)."""
    import pty
    import subprocess
    import sys

    controller, terminal = pty.openpty()
    src = str(Path(ctxbudget.__file__).resolve().parent.parent)
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxbudget", "fit", "-", "--model", "gpt-4o", "--json"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": src},
    )
    os.close(terminal)
    os.write(controller, b'{"messages": [{"role": "user", "content": "hi"}]}\n\x04')
    out, err = process.communicate(timeout=120)
    os.close(controller)
    assert process.returncode == 0, err
    assert "reading the request from stdin (end it with Ctrl-D)" in err.decode()
    assert json.loads(out)["request"]["messages"][0]["content"] == "hi"
    piped = _cli_process(["fit", "-", "--model", "gpt-4o", "--json"], tmp_path, input=b'{"messages": []}')
    assert "reading the request" not in piped.stderr.decode()


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """It printed its banner, then uvicorn's own error, and exited 3 (the README's "cannot fit")."""
    import socket

    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        done = _cli_process(["serve", "--port", str(port), "--store", str(tmp_path / "s.db")], tmp_path)
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert done.stderr.decode().strip() == (
        f"ctxbudget: cannot listen on 127.0.0.1:{port}: Address already in use (--host, --port)"
    )
    # an address this machine does not have (TEST-NET-1: no name to look up, nothing sent)
    absent = _cli_process(["serve", "--host", "192.0.2.1", "--store", str(tmp_path / "s.db")], tmp_path)
    assert absent.returncode == 2 and absent.stdout == b""
    assert "cannot listen on 192.0.2.1:8787: Cannot assign requested address" in absent.stderr.decode()


def test_an_empty_input_name_is_told_as_such() -> None:
    result = CliRunner().invoke(main, ["count", "", "--model", "gpt-4o"])
    assert result.exit_code == 2 and "the input's FILE is an empty name" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["session", "add", "t", "--question", "Notice?", "--tag", "Not\udce9ce"],
        ["session", "add", "t", "--question", "Notice?", "--answer=Yes, caf\udce9."],
        ["assemble", "-", "--model", "gpt-4o", "--format", "openai", "--prompt-cache-key", "k\udce9y"],
    ],
)
def test_an_argument_that_is_not_utf8_is_one_line(tmp_path: Path, args: list[str]) -> None:
    # Python reads a Latin-1 terminal's bytes as lone surrogates: --tag ended `session add` in a
    # traceback once the turn was stored, and --prompt-cache-key wrote a body that is not UTF-8.
    run = CliRunner().invoke(
        main, [*args, "--store", str(tmp_path / "s.db")] if args[0] == "session" else args
    )
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert (
        run.stderr
        == f"ctxbudget: the argument {args[-1].encode('utf-8', 'surrogateescape').decode('utf-8', 'replace')!r} is not UTF-8 text (a terminal in another encoding?): give it in UTF-8\n"
    )
    assert not (tmp_path / "s.db").exists()


def test_a_store_to_create_whose_name_is_not_utf8_is_created(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text('{"items": []}')
    store = str(tmp_path / "caf\udce9.db")
    run = CliRunner().invoke(
        main,
        ["session", "new", "s1", "--base", str(tmp_path / "b.json"), "--model", "gpt-4o", "--store", store],
    )
    # (CliRunner's stdout is strict UTF-8: the line naming the store cannot be written there)
    assert "not UTF-8 text" not in (run.stderr or "") and Path(store).exists(), run.output


def test_an_existing_file_whose_name_is_not_utf8_is_read(tmp_path: Path) -> None:
    name = tmp_path / "caf\udce9.json"
    name.write_text(
        json.dumps({"questions": [{"text": "When?"}], "documents": [{"page_content": "March 3."}]})
    )
    run = CliRunner().invoke(main, ["count", str(name), "--model", "gpt-4o"])
    assert run.exit_code == 0, run.output


def test_a_one_turn_scenario_reads_its_cache_share_of_no_later_turn_and_keeps_its_empty_answer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "one.json"
    path.write_text(
        json.dumps({"name": "one", "base": {"items": []}, "turns": [{"question": "q", "answer": ""}]})
    )
    result = CliRunner().invoke(main, ["simulate", str(path), "--store", str(tmp_path / "one.db")])
    assert result.exit_code == 0, result.output
    assert "no turn after the first read" in result.output and "turns 2..1" not in result.output
    assert [t.answer for t in SQLiteStore(tmp_path / "one.db").turns("one")] == [""]  # as scripted
