"""Trimming strategies, one module each: sentences, text, shares, documents, history."""
