"""``python -m ctxbudget``."""

from .cli import main

main()
