"""Shared pieces of the ``ctxbudget`` command: the group, exit codes, input reading, options.

Exit codes: 0 ok; 1 prefixes differ or an invariant broke; 2 bad input or usage (one line: what
and where); 3 cannot fit; 4 over the cost ceiling; a closed reader of stdout (``| head``) ends a
command quietly with 0. Configuration: an explicit option > environment (``CTXBUDGET_*``) >
default.
"""

from __future__ import annotations

import atexit
import codecs
import errno
import gc
import importlib
import io
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..__main__ import EXIT_INTERRUPTED as EXIT_INTERRUPTED  # Ctrl-C: 128 + SIGINT, as a shell reports it
from ..errors import (
    BudgetExceeded,
    CostCeilingExceeded,
    CtxBudgetError,
    InvalidRequestError,
    InvariantViolation,
    PinnedPrefixChanged,
    PrefixChanged,
    reworded,
    usd,
)
from ..formats.jsonvalue import decode_json, encodes_as_utf8, json_kind

if TYPE_CHECKING:
    from rich.console import Console

EXIT_DIFFERS = 1
EXIT_USAGE = 2
EXIT_CANNOT_FIT = 3
EXIT_COST = 4
EXIT_PREFIX_CHANGED = 5
F = TypeVar("F", bound=Callable[..., Any])


# The library's hints name its options; on the command line the same hint names the flag.
FLAGS = (
    ("max_context_tokens=", "--max-context-tokens"),
    ("reserve_output_tokens=", "--reserve-output-tokens"),
    ('on_overflow="empty"', "--on-overflow empty"),
    ('unknown_model="floor"', "--unknown-model floor"),
    ("catalog=load_catalog(FILE)", "--catalog FILE, or CTXBUDGET_CATALOG"),
    ("input_format=", "--format"),
    ("allow_prefix_change=True", "--allow-prefix-change"),
    ("cost_ceiling_usd=", "--cost-ceiling"),
    # an option's own check ("NAME must be ..."): the library's name, told by the flag
    ("max_context_tokens must", "--max-context-tokens must"),
    ("cost_ceiling_usd must", "--cost-ceiling must"),
    ("expected_output_tokens must", "--expected-output-tokens must"),
    ("idle_seconds must", "--idle-seconds must"),
)


class FiniteRange(click.FloatRange):
    """A number in a range, and finite: ``nan`` passes a plain range (it compares as in range)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a usage error naming the option."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


# A ceiling in USD: above 0 and finite.
USD = FiniteRange(min=0, min_open=True)

# `assemble` names the body it reads --input-format (its --format is the body it builds).
ASSEMBLE_FLAGS = (("input_format=", "--input-format"), *FLAGS)

# `fit` and `count` hold back --reserve-output-tokens (a policy file's reserve_output_tokens, which
# `assemble` and `session` read, is no flag: its own errors keep its name).
FIT_FLAGS = (*FLAGS, ("reserve_output_tokens must", "--reserve-output-tokens must"))

# `serve`'s upstreams, each given by its flag or its environment variable.
SERVE_FLAGS = (
    *FLAGS,
    ("anthropic_upstream must", "--anthropic-upstream (or CTXBUDGET_ANTHROPIC_UPSTREAM) must"),
    ("openai_upstream must", "--openai-upstream (or CTXBUDGET_OPENAI_UPSTREAM) must"),
)


def priced(cost: float | None) -> str:
    """A cost as shown: "price unknown" for a model without prices, never $0."""
    return "price unknown" if cost is None else usd(cost)


def accuracy(exact: bool, safety_factor: float, estimated_parts: Sequence[str] = ()) -> str:
    """How a count was made, for a line of text: "exact"; exact but for parts whose framing the
    provider does not publish (a tool call's: "estimate (x1 safety factor)" gave no reason); or an
    estimate with its safety factor."""
    if exact:
        return "exact"
    if safety_factor == 1 and estimated_parts:
        n = len(estimated_parts)
        return f"exact but for {n} estimated part{'s' if n > 1 else ''}: --json lists them"
    return f"estimate (x{safety_factor:g} safety factor)"


def with_flags(message: str, flags: Sequence[tuple[str, str]] = FLAGS) -> str:
    """A library message as the command line tells it: each option named by its flag."""
    return reworded(message, flags)


def fail(message: str, code: int, flags: Sequence[tuple[str, str]] = FLAGS) -> None:
    """One line on stderr, the options named by the command's flags, and exit with ``code``; the
    code alone when stderr cannot be written (``2>/dev/full``: the failed write ended in exit 1,
    the code of a broken invariant)."""
    with suppress(OSError, ValueError):  # ValueError: a closed stream
        click.echo(f"ctxbudget: {with_flags(message, flags)}", err=True)
    sys.exit(code)


def read_json(source: str) -> Any:
    """The JSON value in a file or stdin (``-``); exit 2 with one line naming what and where."""
    with working(source, "reading"):
        if not source:  # Path("") is the working folder: "cannot read : Is a directory"
            fail("the input's FILE is an empty name (give a file, or - for stdin)", EXIT_USAGE)
        if source == "-" and sys.stdin is None:
            fail("cannot read stdin: it is closed (give the input's FILE instead)", EXIT_USAGE)
        if source == "-" and sys.stdin.isatty():  # a terminal: say what is awaited
            click.echo("ctxbudget: reading the request from stdin (end it with Ctrl-D)", err=True)
        try:
            if source == "-":
                data = _bounded(sys.stdin.buffer, "stdin")
            else:
                with Path(source).open("rb") as stream:
                    data = _bounded(stream, source)
        except OSError as exc:
            fail(f"cannot read {source}: {exc.strerror or exc}", EXIT_USAGE)
        name = "stdin" if source == "-" else source
        try:
            return decode_json(data, name, refuse_repeats=True)
        except InvalidRequestError as exc:
            fail(_from_file(exc, name), EXIT_USAGE)


def _from_file(exc: InvalidRequestError, name: str) -> str:
    """A reading error as one line naming the input: the checks of the values read (``1e400``
    read as inf) give their JSON path alone, where the reader's own errors start with the name."""
    return f"{name}: {exc}" if exc.path else str(exc)


# The largest input read: 60 million tokens of text, eight times the providers' 32 MB request
# limit. `fit /dev/zero` read until the kernel killed it (24 GB).
MAX_INPUT_BYTES = 256 * 1024 * 1024
_READ_CHUNK = 1024 * 1024


def _bounded(stream: Any, name: str) -> bytes:
    """The stream's bytes, read a chunk at a time: exit 2 past :data:`MAX_INPUT_BYTES`, and stop
    at a NUL byte (JSON text holds none: the bytes read so far are what the error is told from,
    so an endless stream of them is refused at once)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(_READ_CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            fail(
                f"{name} is over {MAX_INPUT_BYTES // (1024 * 1024):,} MiB, the most the command reads "
                "(a request that large is no JSON body a provider takes)",
                EXIT_USAGE,
            )
        # short: the end (a terminal's Ctrl-D is no lasting end: reading on would wait for more)
        if b"\0" in chunk or len(chunk) < _READ_CHUNK:
            break
    return b"".join(chunks)


# An input this large takes about a second or more to read, count and fit.
LARGE_INPUT_BYTES = 8 * 1024 * 1024


# Off a terminal (a pipe, a file, a CI log) a table is as wide as its cells: rich's default there
# is 80 columns, which cut "documents" to "documen…" in `make demo`'s own output.
UNBOUNDED_WIDTH = 1_000


def table_console(*, stderr: bool = False) -> Console:
    """A console for tables: the terminal's width on a terminal, else :data:`UNBOUNDED_WIDTH`."""
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=UNBOUNDED_WIDTH)


@contextmanager
def working(source: str, what: str) -> Iterator[None]:
    """A spinner on the terminal (stderr) while a large input file is read and worked on; nothing
    for a small input, stdin, or a stderr that is not a terminal (logs and pipes stay clean)."""
    try:
        size = 0 if source == "-" else Path(source).stat().st_size
    except OSError:
        size = 0
    if size < LARGE_INPUT_BYTES or not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(f"ctxbudget: {what} {source} ({size / 1e6:,.0f} MB)"):
        yield


def model_of(model: str | None, request: Any) -> str:
    """The model to budget for: ``--model``, else the body's ``model`` (exit 2 when neither, and
    for ``--model ""``: given, but blank, it was taken for no option and the body's model used)."""
    if model is not None and not model.strip():
        fail(f"--model is blank ({model!r}): name the model the request is for", EXIT_USAGE)
    if model:
        return model
    if not isinstance(request, dict):  # no body to take a model from: say what is wrong with it
        fail(f"$: the request body must be a JSON object, got {json_kind(request)}", EXIT_USAGE)
    given = request.get("model")
    if isinstance(given, str) and given.strip():
        return given
    if "model" in request:  # there, but no model id
        fail(
            f"$.model: a model id is a non-empty string, got {json.dumps(given)[:60]} (or pass --model)",
            EXIT_USAGE,
        )
    fail('no model: pass --model, or give the body a "model" field', EXIT_USAGE)
    raise AssertionError("unreachable")


def echo_warnings(warnings: Any) -> None:
    """Warnings go to stderr in every output mode (they also stay in the report)."""
    for warning in warnings:
        click.echo(f"ctxbudget: warning: {with_flags(warning)}", err=True)


def run_action(
    action: Callable[[], None], flags: Sequence[tuple[str, str]] = FLAGS, *, output: bool = True
) -> None:
    """Run a command's work; a library error is one line and its exit code (``flags`` name the
    command's own flags for the library's options). ``output``: what the command writes to stdout
    is its answer (a server's lines are not: it runs without a stdout too)."""
    try:
        with _named_stdout(output):
            action()
    except CtxBudgetError as exc:
        fail(str(exc), exit_code(exc), flags)
    except BrokenPipeError:
        raise  # the reader went away: nobody to tell (OneLineGroup ends quietly)
    except OutputError as exc:
        fail(f"cannot write the output to stdout: {exc.strerror or exc}", EXIT_USAGE, flags)
    except OSError as exc:  # a file the command writes or reads (``--out`` under a file, read-only)
        where = f" {exc.filename}" if exc.filename else ""
        fail(f"cannot use{where}: {exc.strerror or exc}", EXIT_USAGE, flags)


class OutputError(OSError):
    """A write to stdout failed (a full disk, an I/O error): an OSError from a write names no file,
    and was told as "cannot use: No space left on device"."""


class _NamedStdout:
    """``sys.stdout`` as the command's output goes through it (click's echo and rich's console
    look it up at each write): a failed write or flush raises :class:`OutputError`, a closed
    reader's :class:`BrokenPipeError` as it was; everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text``, a failure told as stdout's."""
        with _as_output_error():
            written: int = self._stream.write(text)
        return written

    def flush(self) -> None:
        """Flush, a failure told as stdout's."""
        with _as_output_error():
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _NoStdout:
    """The stdout of a process started without one: every write fails."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is not open (closed when the command started)")

    def flush(self) -> None:
        """Nothing was written."""

    def isatty(self) -> bool:
        return False


@contextmanager
def _as_output_error() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(exc.errno, exc.strerror) from exc


@contextmanager
def _named_stdout(output: bool) -> Iterator[None]:
    """``sys.stdout`` wrapped in :class:`_NamedStdout` while a command's action runs."""
    stream = sys.stdout
    if stream is None and not output:  # none, and none needed: its lines go to the null device
        with open(os.devnull, "w", encoding="utf-8") as nowhere:  # (uvicorn's logging read None's isatty)
            sys.stdout = nowhere
            try:
                yield
            finally:
                sys.stdout = stream
        return
    # No stdout at all (``>&-``): click and rich wrote nothing and the command ended with 0, its
    # answer lost without a word; a write now fails as a failed write does (exit 2, naming stdout).
    sys.stdout = _NamedStdout(stream if stream is not None else _NoStdout())
    try:
        yield
    finally:
        sys.stdout = stream


def end_quietly() -> None:
    """The reader of stdout went away (``ctxbudget models | head -1``): end with exit 0 and no
    message, as a command whose output was taken does; what is left unwritten goes to the null
    device, so the interpreter's own flush at exit finds no closed pipe."""
    with suppress(OSError, ValueError, AttributeError):  # no descriptor (a test's captured stream)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)


_QUICK_EXIT = [False]


def skip_collection_at_exit() -> None:
    """Let the process end without the interpreter freeing and collecting what the command built.

    At exit CPython tears the heap down: it frees the built encoding (o200k_base: its 200,000
    token -> rank tables, in Python and in tiktoken's Rust core) and collects every module's
    objects, about 90 ms of a 0.38 s ``ctxbudget count`` measured, after the answer is printed.
    Freezing the collector (``gc.freeze``, as an ``atexit`` handler) leaves everything alive at
    exit to the operating system (``assemble`` of the legal example: 115-138 ms -> 16-23 ms from
    its output to its end). Only for commands that hold nothing a finalizer must close (count,
    models, assemble, and fit without an embedding model: no files or connections; the threads
    that count ahead are joined before atexit handlers run); atexit handlers still run and the
    standard streams are still flushed. Called in-process (tests) it only takes effect when that
    process ends.
    """
    if not _QUICK_EXIT[0]:
        _QUICK_EXIT[0] = True
        atexit.register(gc.freeze)


# Library errors by exit code (the README's table); the first row the error is an instance of
# applies, and every other library error is bad input.
EXIT_CODES: tuple[tuple[type[CtxBudgetError], int], ...] = (
    (BudgetExceeded, EXIT_CANNOT_FIT),
    (CostCeilingExceeded, EXIT_COST),  # PriceUnknown too: a ceiling that cannot be checked
    (PinnedPrefixChanged, EXIT_PREFIX_CHANGED),
    (PrefixChanged, EXIT_DIFFERS),
    (InvariantViolation, EXIT_DIFFERS),
)


def exit_code(exc: CtxBudgetError) -> int:
    """The exit code of a library error (:data:`EXIT_CODES`)."""
    return next((code for kind, code in EXIT_CODES if isinstance(exc, kind)), EXIT_USAGE)


ALLOW_PREFIX_CHANGE_OPTION = click.option(
    "--allow-prefix-change",
    is_flag=True,
    help="Let the pinned prefix differ from the previous turn's (a new playbook version); without "
    "it a change fails closed with exit 5 (INV-CTX-01).",
)
IDLE_SECONDS_OPTION = click.option(
    "--idle-seconds",
    type=FiniteRange(min=0, max=1e9),  # a plain FloatRange let nan through
    metavar="S",
    help="Seconds since the previous turn's call: its cached prefixes expire 5 minutes or an hour "
    "after their last use in the predicted reads and the cost [default: none taken to have passed].",
)


def _catalog_paths(ctx: click.Context, param: click.Parameter, paths: tuple[str, ...]) -> tuple[str, ...]:
    """The catalog paths given: an empty entry (CTXBUDGET_CATALOG=":", a trailing separator)
    names no file, as in PATH; a path from the variable that is no file is a bad value of the
    variable (it was told as "cannot read catalog file", with nothing naming where it came from)."""
    given = tuple(p for p in paths if p)
    if _from_envvar(ctx, param):
        missing = next((p for p in given if not Path(p).is_file()), None)
        if missing is not None:
            raise click.BadParameter(f"{missing!r} is no file")
    return given


CATALOG_OPTION = click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    envvar="CTXBUDGET_CATALOG",
    type=click.Path(),  # so the variable's paths are split at os.pathsep, as PATH is: not at spaces
    callback=lambda ctx, param, paths: _catalog_paths(ctx, param, paths),
    metavar="FILE",
    help="Extra catalog file (TOML, or JSON by its .json name) adding or overriding models "
    f"(repeatable; env CTXBUDGET_CATALOG, several paths separated by {os.pathsep!r}).",
)


def unknown_model_option(refusal: str) -> Callable[[F], F]:
    """``--unknown-model``: ``refusal`` says what ``error`` does (a command exits, the gateway
    answers the request)."""
    return click.option(
        "--unknown-model",
        type=click.Choice(["error", "floor"]),
        default="error",
        show_default=True,
        envvar="CTXBUDGET_UNKNOWN_MODEL",
        help=f"A model id the catalog cannot resolve: {refusal}, or budget it at 8,191 tokens "
        "with a warning (env CTXBUDGET_UNKNOWN_MODEL).",
    )


UNKNOWN_MODEL_OPTION = unknown_model_option("fail (exit 2)")


def max_context_option(purpose: str) -> Callable[[F], F]:
    """``--max-context-tokens``: an explicit window (0: the catalog's)."""
    return click.option(
        "--max-context-tokens",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help=f"Explicit window in tokens{purpose} (0: resolve from the catalog).",
    )


def policy_option(purpose: str) -> Callable[[F], F]:
    """``--policy``: a bundled policy's name or a policy file, legal-review unless given."""
    return click.option(
        "--policy",
        "policy_ref",
        default="legal-review",
        show_default=True,
        metavar="NAME|FILE",
        help=f"A bundled policy's name (`ctxbudget policies`) or a policy file (TOML){purpose}.",
    )


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def common_options(func: F) -> F:
    options = [
        CATALOG_OPTION,
        UNKNOWN_MODEL_OPTION,
        click.option(
            "--format",
            "format_",
            type=click.Choice(["question", "openai", "anthropic", "responses"]),
            help="Request format (detected when omitted).",
        ),
        JSON_OPTION,
        click.option(
            "--model",
            default=None,
            help="Model id, e.g. gpt-5, claude-sonnet-4-5, openai/gpt-4o [default: the body's `model`; "
            "another model than the body's is warned of: the body still names its own].",
        ),
        click.argument("source", default="-", metavar="[FILE|-]"),
    ]
    for option in options:
        func = option(func)
    return func


# Each command's module, imported when the command is looked up (not at start-up): ``count`` then
# loads neither the assembly nor the gateway (measured: 0.52 s to 0.3 s for a tiny count).
COMMAND_MODULES = {
    "fit": "fit_commands",
    "count": "fit_commands",
    "models": "fit_commands",
    "policies": "assemble_commands",
    "assemble": "assemble_commands",
    "verify-prefix": "assemble_commands",
    "serve": "serve_command",
    "simulate": "session_commands",
    "session": "session_commands",
}


class OneLineGroup(click.Group):
    """A command group whose usage errors are one line on stderr (exit 2), like every other error,
    and whose commands are imported on first lookup (:data:`COMMAND_MODULES`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, loaded or not."""
        return sorted(set(self.commands) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module first (importing registers it on this group)."""
        module = COMMAND_MODULES.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module(f"{__package__}.{module}")
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a closed reader of its output ends it quietly (click exited 1, the
        code of a broken invariant)."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            end_quietly()

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        _escaping_streams()
        given = kwargs["args"] if "args" in kwargs else (args[0] if args else None)
        _utf8_arguments(sys.argv[1:] if given is None else given)
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
                # A group given no command (click 8.2+; 8.1 printed the help itself): its help
                # on stdout and exit 0, as --help does.
                click.echo(exc.ctx.get_help(), color=exc.ctx.color)
                sys.exit(0)
            where = f" ({exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            fail(f"{_from_environment(exc).format_message()}{where}", EXIT_USAGE)
        except click.exceptions.Abort:  # Ctrl-C (click's Abort of a KeyboardInterrupt)
            fail("aborted", EXIT_INTERRUPTED)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            fail(exc.format_message(), EXIT_USAGE)


def _from_environment(exc: click.exceptions.UsageError) -> click.exceptions.UsageError:
    """A bad value that came from an environment variable, named as that variable: the user set
    ``CTXBUDGET_UNKNOWN_MODEL=bogus``, not ``--unknown-model``, and looked for the option in vain."""
    param, ctx = getattr(exc, "param", None), exc.ctx
    if not isinstance(exc, click.BadParameter) or param is None or ctx is None or not param.name:
        return exc
    if not isinstance(param.envvar, str) or not _from_envvar(ctx, param):
        return exc
    exc.param_hint = f"the environment variable {param.envvar} (read for {param.get_error_hint(ctx)})"
    return exc


def _from_envvar(ctx: click.Context, param: click.Parameter) -> bool:
    """Whether the parameter's value was read from its environment variable."""
    return bool(param.name) and ctx.get_parameter_source(param.name) is click.core.ParameterSource.ENVIRONMENT


def _utf8_arguments(args: Sequence[str]) -> None:
    """Refuse a text option's value that is not UTF-8 (one line, exit 2). Python reads the
    command line's other bytes as lone surrogates: a ``--tag`` or ``--answer`` typed on a Latin-1
    terminal ended ``session add`` in a traceback when the turn was stored, and
    ``--prompt-cache-key`` wrote a body that is not UTF-8. Paths are not held to it (a file to
    create, such as ``--store``, may have any name the system takes)."""
    for n, arg in enumerate(args):
        if not isinstance(arg, str):
            continue
        name, given, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if given and name in TEXT_OPTIONS:
            _utf8_or_fail(value, arg)
        elif arg in TEXT_OPTIONS and n + 1 < len(args) and isinstance(args[n + 1], str):
            _utf8_or_fail(args[n + 1], args[n + 1])


# The options whose values are text a turn records or a body carries (not paths).
TEXT_OPTIONS = frozenset({"--question", "--answer", "--tag", "--tool-result", "--prompt-cache-key"})


def session_name_argument(function: F) -> F:
    """A session's NAME, refused as a text option is when it is not UTF-8: a name typed on a
    Latin-1 terminal ended `session show`, `add` and `export` in a traceback (the store could not
    encode it to look it up; `session new` refuses such a name)."""

    def utf8_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
        _utf8_or_fail(value, value)
        return value

    return click.argument("name", callback=utf8_name)(function)


def _utf8_or_fail(value: str, arg: str) -> None:
    if encodes_as_utf8(value):
        return
    shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    fail(
        f"the argument {shown!r} is not UTF-8 text (a terminal in another encoding?): give it in UTF-8",
        EXIT_USAGE,
    )


def _escaping_streams() -> None:
    """Standard streams that cannot write every character (Windows writes redirected output in
    cp1252; ``PYTHONIOENCODING=ascii``) write what they cannot as escapes: a Japanese body ended
    ``fit --body`` in a traceback (and ``session add`` after it had stored the turn). JSON is
    written escaped to ASCII there (:func:`utf8_out`), so it stays exact."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not _writes_utf8(stream):
            stream.reconfigure(errors="backslashreplace")


def _writes_utf8(stream: Any) -> bool:
    try:
        return codecs.lookup(stream.encoding or "ascii").name == "utf-8"
    except LookupError:
        return False


def utf8_out() -> bool:
    """Whether stdout writes UTF-8 (JSON is printed with its characters as they are), else JSON
    escapes every character past ASCII (``\\u00e9``): valid JSON in any encoding."""
    return sys.stdout is not None and _writes_utf8(sys.stdout)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxbudget")
def main() -> None:
    """Fit LLM requests into a token budget, exactly and deterministically, offline."""


STORE_OPTION = click.option(
    "--store",
    "store_path",
    default="sessions.db",
    show_default=True,
    envvar="CTXBUDGET_STORE",
    metavar="FILE|URL",
    help="Session store: an SQLite file, or a postgresql:// URL (needs the postgres extra) (env CTXBUDGET_STORE).",
)

BODY_FORMAT_OPTION = click.option(
    "--format",
    "format_",
    type=click.Choice(["anthropic", "openai", "text"]),
    default=None,
    help="Body to render [default: anthropic; a report warning when the model is served by OpenAI].",
)


def echo_body(body: Any) -> None:
    """Print a rendered body: plain text as it is, a provider body as JSON."""
    click.echo(body if isinstance(body, str) else json.dumps(body, ensure_ascii=not utf8_out()))
