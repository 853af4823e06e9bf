"""Prometheus metrics, served at /metrics by the daemon."""

from prometheus_client import Counter, Histogram

LLM_CALLS = Counter("dcpm_llm_calls_total", "LLM calls", ["purpose"])
LLM_TOKENS = Counter("dcpm_llm_tokens_total", "LLM tokens (prompt + completion)", ["purpose"])
WRITES = Counter("dcpm_writer_requests_total", "add_memory requests processed by the writer", ["outcome"])
WRITER_OVERHEAD = Histogram("dcpm_writer_non_llm_seconds", "Writer time outside LLM calls per request",
                            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
SEARCHES = Histogram("dcpm_search_seconds", "Search latency", buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
