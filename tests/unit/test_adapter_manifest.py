"""The manifest pins the backbone; the query_adapter setting names the adapter to load."""

from __future__ import annotations

import pytest

from dcpm.adapter import SHIPPED_ADAPTER
from dcpm.adapter.encoder import adapter_directory
from dcpm.adapter.manifest import (
    AdapterManifest,
    Backbone,
    TrainingRecord,
    check_backbone,
    read_manifest,
    write_manifest,
)
from dcpm.errors import Invalid


class Embedder:
    def __init__(self, name: str, fingerprint: str):
        self.name, self._fingerprint, self.pooling, self.query_instruction = name, fingerprint, "mean", ""

    def fingerprint(self) -> str:
        return self._fingerprint


def manifest() -> AdapterManifest:
    return AdapterManifest(name="lives", backbone=Backbone(name="all-MiniLM-L6-v2", fingerprint="minilm:abc"),
                           training=TrainingRecord(data_hash="0" * 64, personas=2, facts=20, rows=80))


def test_manifest_round_trips_through_its_directory(tmp_path):
    write_manifest(tmp_path, manifest())
    assert read_manifest(tmp_path) == manifest().model_copy(update={"created_at": read_manifest(tmp_path).created_at})


def test_an_adapter_for_another_backbone_is_refused_with_both_names():
    check_backbone(manifest(), Embedder("all-MiniLM-L6-v2", "minilm:abc"))
    with pytest.raises(Invalid, match=r"trained for backbone all-MiniLM-L6-v2 .*but the embedder is bge-small"):
        check_backbone(manifest(), Embedder("bge-small", "bge:123"))


def test_a_directory_without_manifest_is_not_an_adapter(tmp_path):
    with pytest.raises(Invalid, match="not a dcpm adapter"):
        read_manifest(tmp_path)


def test_query_adapter_setting_names_shipped_none_or_a_directory(tmp_path):
    assert adapter_directory("default") == SHIPPED_ADAPTER
    assert adapter_directory("none") is None and adapter_directory("") is None
    assert adapter_directory(str(tmp_path)) == tmp_path
    with pytest.raises(Invalid, match="not a directory"):
        adapter_directory(str(tmp_path / "missing"))


def test_adapter_info_says_how_the_shipped_adapter_is_served():
    """The query form and the strength decide what a query costs and what it finds: `dcpm adapter
    info` prints both, as the manifest records them."""
    from typer.testing import CliRunner

    from dcpm.adapter import SHIPPED_ADAPTER
    from dcpm.adapter.manifest import query_form, read_manifest
    from dcpm.cli.main import app

    manifest = read_manifest(SHIPPED_ADAPTER)
    result = CliRunner().invoke(app, ["adapter", "info", "default"])
    assert result.exit_code == 0, result.output
    passes = "one pass" if query_form(manifest) == "adapted" else "two passes"
    assert passes in result.output and f"at strength {manifest.strength:g}" in result.output
