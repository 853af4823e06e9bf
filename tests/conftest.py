"""Shared fixtures: the real embedder (loaded once per test run) and services on fresh data dirs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def embedder():
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    return load_embedder(Settings())


@pytest.fixture
def settings(tmp_path: Path):
    from dcpm.config import Settings

    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def service(settings, embedder) -> Iterator:
    from dcpm.service import MemoryService

    svc = MemoryService(settings, embedder=embedder)
    yield svc
    svc.close()
