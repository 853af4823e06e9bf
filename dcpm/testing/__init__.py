"""Test helpers shipped with the package: a scripted OpenAI-compatible server for tests and benchmarks."""
