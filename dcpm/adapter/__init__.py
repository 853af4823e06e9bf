"""Madeleine's associative query adapter (the Madeleine paper; DCPM 2.4 step 1): a query-side
LoRA on the frozen embedder E.

Serving sits here: `encoder` replaces only the query vector with normalize(E(q) + E_θ(q)),
`lora` loads (and merges) the weights, `manifest` records what an adapter was trained on and
refuses a mismatched backbone, `latency` times it. Memories and the index are always E(m), so
adding or swapping an adapter never touches stored data. Training, the objective, the held-out
evaluation and the simulated-lives corpus tools live in `training/`.
Nothing here imports torch at module import time, so `dcpm --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED_ADAPTER = Path(__file__).resolve().parent / "default"
