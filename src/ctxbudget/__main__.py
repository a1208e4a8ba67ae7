"""``python -m ctxbudget``, and the ``ctxbudget`` command's entry point.

The command's modules (click, and those of the command run) are imported inside :func:`main`, so
that Ctrl-C while they load, in the command's first 50-300 ms, ends as any other Ctrl-C does:
one line (after a line break, past the ``^C`` a terminal shows) and exit 130, not Python's traceback of the import it stopped.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it (1 is a broken invariant)


def main() -> None:
    """Run the command line; Ctrl-C anywhere in it is exit 130 with one line."""
    try:
        from .cli import main as command

        command()
    except KeyboardInterrupt:
        try:
            sys.stderr.write("\nctxbudget: aborted\n")  # as click's own Ctrl-C: past the ^C shown
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # no stderr, a closed or a full one
            pass
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
