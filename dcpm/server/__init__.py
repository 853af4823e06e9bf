"""The daemon's HTTP API (FastAPI), a surface on the service: `app` (middleware, error mapping,
health, the admin page), `routes/` by resource, `mem0/` (the Mem0 platform API), `caller`
(who is asking) and `daemon` (the `dcpm serve` lifecycle)."""
