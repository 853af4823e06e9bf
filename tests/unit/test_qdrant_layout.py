"""The Qdrant collection a server or cluster gets for many users (dcpm.index.server). The
client's local mode ignores these parameters, so they are checked here as sent."""

from __future__ import annotations

from qdrant_client import models as qm

from dcpm.config import Settings
from dcpm.index.base import DENSE, SPARSE
from dcpm.index.server import TENANT_INDEX, collection_layout


def test_users_are_tenants_with_a_graph_each_and_no_global_graph():
    layout = collection_layout(Settings(), 384, True)
    assert TENANT_INDEX.is_tenant is True
    assert layout["hnsw_config"].m == 0 and layout["hnsw_config"].payload_m == Settings().hnsw_m == 32
    assert layout["hnsw_config"].ef_construct == Settings().hnsw_ef_construct
    assert layout["vectors_config"][DENSE].size == 384
    assert layout["sparse_vectors_config"][SPARSE].modifier == qm.Modifier.IDF


def test_by_default_vectors_stay_in_memory_unquantized_on_one_unreplicated_shard():
    layout = collection_layout(Settings(), 384, False)
    assert layout["vectors_config"][DENSE].on_disk is None and layout["quantization_config"] is None
    assert layout["shard_number"] == 1 and layout["replication_factor"] == 1
    assert layout["sparse_vectors_config"][SPARSE].modifier is None  # an embedder that weighs its own terms


def test_a_cluster_layout_puts_vectors_on_disk_quantized_in_replicated_shards():
    settings = Settings(qdrant_on_disk=True, qdrant_quantization="int8", qdrant_shards=3,
                        qdrant_replication_factor=2)
    layout = collection_layout(settings, 1024, True)
    assert layout["vectors_config"][DENSE].on_disk is True and layout["hnsw_config"].on_disk is True
    assert layout["sparse_vectors_config"][SPARSE].index.on_disk is True and layout["on_disk_payload"] is True
    assert layout["quantization_config"].scalar.type == qm.ScalarType.INT8
    assert layout["quantization_config"].scalar.always_ram is True
    assert layout["shard_number"] == 3 and layout["replication_factor"] == 2
