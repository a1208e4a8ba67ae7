"""Multi-turn sessions: turns, the JSON state ledger, compaction, and storage."""

from .ledger import LEDGER_SCHEMA, LedgerRules, reduce_turn, render_ledger, validate_entry
from .session import Compaction, PreparedTurn, Session
from .store import SessionMeta, SessionStore, SQLiteStore, connect_store, name_problem
from .turns import ToolCall, ToolResult, Turn

__all__ = [
    "LEDGER_SCHEMA",
    "Compaction",
    "LedgerRules",
    "PreparedTurn",
    "SQLiteStore",
    "Session",
    "SessionMeta",
    "SessionStore",
    "ToolCall",
    "ToolResult",
    "Turn",
    "connect_store",
    "name_problem",
    "reduce_turn",
    "render_ledger",
    "validate_entry",
]
