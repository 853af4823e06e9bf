"""Madeleine's associative query adapter: a query-side LoRA on the frozen embedder E.

Serving (`encoder.py`) replaces only the query vector with normalize(E(q) + E_θ(q)); memories
and the index are always E(m), so adding or swapping an adapter never touches stored data.
Training lives in `workers/train_adapter.py`; the corpus of simulated lives in `lives.py`.
Nothing here imports torch at module import time, so `dcpm --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED_ADAPTER = Path(__file__).resolve().parent / "default"
