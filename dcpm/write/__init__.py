"""System 1, the synchronous writer (DCPM 2.2): `raw` commits each turn verbatim before any LLM
call (step i); `writer` extracts with one LLM call, reconciles against the nearest items with one
batched call (`reconcile` holds the pure decisions) and applies the result in one transaction
(steps ii-iv); `remember` is the add_memory entry; `recovery` retries pending input with
backoff; `importer` reads bulk chat histories."""
