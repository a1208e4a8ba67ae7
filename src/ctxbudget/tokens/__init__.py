"""Token counting: the Encoding plug point, the registry, bundled OpenAI encodings, counters."""

from .counter import ChunkAnalysis, TokenCounter, analyze, clear_count_cache
from .encoding import Encoding, TiktokenEncoding
from .registry import bare_model_id, encoding_name_for_model, get_encoding, list_encodings, register_encoding

__all__ = [
    "ChunkAnalysis",
    "Encoding",
    "TiktokenEncoding",
    "TokenCounter",
    "analyze",
    "bare_model_id",
    "clear_count_cache",
    "encoding_name_for_model",
    "get_encoding",
    "list_encodings",
    "register_encoding",
]
