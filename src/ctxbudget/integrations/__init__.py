"""Edges to other frameworks, each behind its own optional extra (``ctxbudget[langchain]``).

Nothing here is imported by ``import ctxbudget``: import the integration's module itself
(``from ctxbudget.integrations.langchain import trim_messages``).
"""
