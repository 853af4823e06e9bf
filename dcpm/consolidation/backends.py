"""What a consolidation run needs from its process: the store, the index, the embedder, the LLM
client and the settings, built the same way by the daemon, the CLI and workers elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

from dcpm.config import Settings
from dcpm.embedding import Embedder
from dcpm.index import VectorIndex
from dcpm.llm import LLMClient
from dcpm.store.db import Database


@dataclass
class Backends:
    """What a run needs: the store, the index, the embedder and the LLM client of this process.
    The daemon, the CLI and workers on other machines build it the same way."""

    db: Database
    index: VectorIndex
    embedder: Embedder
    llm: LLMClient | None
    settings: Settings
