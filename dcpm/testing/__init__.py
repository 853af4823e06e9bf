"""Shipped with the package for tests and benchmarks: a scripted OpenAI-compatible server (real
HTTP, scripted answers, able to be slow or fail on purpose) that the LLM client talks to."""
