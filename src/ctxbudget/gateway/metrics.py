"""Prometheus metrics of one gateway (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]


class Metrics:
    """Requests, tokens, cache, cost, fit decisions, upstream errors, and calibrated factors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "ctxbudget_requests", "Requests by route and outcome", ["route", "outcome"], registry=r
        )
        self.tokens_in = Counter(
            "ctxbudget_input_tokens", "Input tokens billed upstream", ["model"], registry=r
        )
        self.tokens_out = Counter(
            "ctxbudget_output_tokens", "Output tokens billed upstream", ["model"], registry=r
        )
        self.cache_read = Counter(
            "ctxbudget_cache_read_tokens", "Input tokens read from cache", ["model"], registry=r
        )
        self.cache_write = Counter(
            "ctxbudget_cache_write_tokens", "Input tokens written to cache", ["model"], registry=r
        )
        self.cost_estimated = Counter(
            "ctxbudget_cost_estimated_usd", "Estimated cost before sending", ["model"], registry=r
        )
        self.cost_actual = Counter(
            "ctxbudget_cost_actual_usd", "Cost from the provider's usage", ["model"], registry=r
        )
        self.decisions = Counter("ctxbudget_fit_decisions", "Fit decisions", ["decision"], registry=r)
        self.upstream_errors = Counter(
            "ctxbudget_upstream_errors", "Upstream failures by kind", ["kind"], registry=r
        )
        self.calibration_ignored = Counter(
            "ctxbudget_calibration_ignored",
            "Usage outside the calibration band (not covered by the estimate), ignored",
            ["model"],
            registry=r,
        )
        self.record_failures = Counter(
            "ctxbudget_record_failures", "Answered turns that could not be recorded", ["error"], registry=r
        )
        self.internal_errors = Counter(
            "ctxbudget_internal_errors", "Requests that failed inside the gateway", ["stage"], registry=r
        )
        self.store_up = Gauge(
            "ctxbudget_store_up", "1 while the session store serves, 0 once an operation failed", registry=r
        )
        self.store_commit_seconds = Histogram(
            "ctxbudget_store_commit_seconds",
            "Time to store an answered turn (the answer waits for it)",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0, 5.0),
            registry=r,
        )
        self.store_errors = Counter(
            "ctxbudget_store_errors", "Failures of the session store by operation", ["operation"], registry=r
        )
        self.safety_factor = Gauge(
            "ctxbudget_safety_factor", "Calibrated estimate factor", ["model"], registry=r
        )

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
