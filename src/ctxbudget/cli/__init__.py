"""The ``ctxbudget`` command: thin commands that parse, call one library function, print. Each
command's module is imported when the command is looked up (``base.COMMAND_MODULES``)."""

from .base import main

__all__ = ["main"]
