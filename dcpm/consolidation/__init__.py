"""System 2, the nighttime consolidation (DCPM 2.3, Algorithm 2): `reinduction` of the nodes hard
deletes left stale, `triage` and `clustering` (phase 1, two-stage DBSCAN, no LLM), the
`induction` agent with its four tools (phase 2), the cross-domain `sweep` that induces core
schemas (phase 3), the `graph` tables they write, `runs` (one recorded, resumable run per user,
on the `backends` of its process), `jobs` (runs started on request) and `schedule` (the nightly
job)."""
