"""The daemon's HTTP API (FastAPI)."""
