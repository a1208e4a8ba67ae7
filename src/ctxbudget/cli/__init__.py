"""The ``ctxbudget`` command: thin commands that parse, call one library function, print."""

from . import assembly, fitting, serve, sessions  # noqa: F401 - importing registers the commands
from .base import main

__all__ = ["main"]
