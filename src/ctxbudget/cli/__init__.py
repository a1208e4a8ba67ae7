"""The ``ctxbudget`` command: thin commands that parse, call one library function, print."""

from . import assemble_commands, fit_commands, serve_command, session_commands  # noqa: F401 - importing registers the commands
from .base import main

__all__ = ["main"]
