"""The relational store, source of truth of the memory model (DCPM 2.1; ARCHITECTURE "Storage"):
SQLAlchemy `models` and sessions (`db`, migrated by Alembic from `migrations/`), supersedes
chains (`items` writes ADD / SUPERSEDE / UPDATE, `chains` walks them), the append-only event
log (`events`), store leases for per-user ordering (`leases`), per-layer consent (`consent`),
and the data directory's lock and free-space guard (`datadir`)."""
