"""Settings: one object read from `DCPM_*` environment variables and an optional TOML file.

Paper constants carry the paper's name and default (DCPM 3.1, Madeleine 4.4) so a reader can
find them; every one of them can be overridden.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from dcpm.errors import Invalid
from dcpm.setting_types import (
    DEFAULT_CRON,
    AtLeastOne,
    Cosine,
    CosineDistance,
    Count,
    Crontab,
    DatabaseUrl,
    DataDir,
    Fraction,
    NonNegative,
    Port,
    Positive,
    Share,
)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class Settings(BaseSettings):
    # A key of the TOML file that names no setting is refused (a typo would silently keep the default);
    # DCPM_* variables that name none stay ignored: other tools may set such variables.
    model_config = SettingsConfigDict(env_prefix="DCPM_", extra="forbid", allow_inf_nan=False)

    # Where things live
    data_dir: DataDir = Field(default_factory=lambda: Path.home() / ".dcpm")
    database_url: DatabaseUrl = ""  # empty: SQLite file in data_dir
    qdrant_url: str = ""  # empty: embedded qdrant-edge shard in data_dir
    qdrant_api_key: SecretStr = SecretStr("")
    qdrant_collection: str = "dcpm_memories"

    # Vector index backend (dcpm.index): the embedded shard, a Qdrant server, or pgvector in PostgreSQL
    index_backend: Literal["", "edge", "qdrant", "pgvector"] = ""  # empty: qdrant when qdrant_url is set, else edge
    pgvector_url: DatabaseUrl = ""  # the PostgreSQL holding the pgvector index; empty: database_url
    pgvector_table: str = "dcpm_vectors"  # its tables: this name, NAME_terms (BM25 weights), NAME_meta
    pgvector_user_hnsw_rows: Count = 10_000  # a user past this many points gets an HNSW graph of their own
    pgvector_build_memory: str = "512MB"  # maintenance_work_mem while such a graph is built
    qdrant_on_disk: bool = False  # vectors and HNSW graph memory-mapped from disk (collections past RAM)
    qdrant_quantization: Literal["", "int8"] = ""  # int8: scalar-quantized copy in RAM, originals rescore
    qdrant_shards: AtLeastOne = 1  # shards of a new collection (a cluster spreads them over its nodes)
    qdrant_replication_factor: AtLeastOne = 1  # copies of each shard on different nodes of a cluster

    # Embeddings
    embedder: str = DEFAULT_EMBEDDER  # name or path; "bge-m3" selects BGEM3FlagModel
    embedder_pooling: str = "mean"  # all-MiniLM-L6-v2 is a mean-pooled model
    embedder_device: str = "auto"  # auto | cpu | cuda
    embed_batch_size: AtLeastOne = 64
    # torch intra-op threads for one query, set when the embedder loads (0: torch's default, one
    # per core). On a shared 2-core host one thread encoded a query in 25 ms (p50) against 190+ ms
    # with two.
    query_threads: Count = 1
    # the same for batches of 8+ texts (import, reindex, training): 0 = torch's default, every core; on this
    # 2-core host, quiet, 270 documents/s against 141 with one thread (dcpm.embedding.threads)
    document_threads: Count = 0
    query_instruction: str = ""

    # Associative query adapter (Madeleine 4.3-4.4, appendix B)
    # "default": the shipped adapter (lives-v2 at strength 0.9: persona-split cue R@10 35.7 -> 51.8,
    # writer-disjoint cue 18.8 -> 27.5, LoCoMo cats 1-4 R@10 76.5 -> 75.7); a directory; "none" or "": frozen E only.
    query_adapter: str = "default"
    # scales the LoRA update at load (W + s·BA; 0 = frozen); unset: the adapter manifest's own strength
    adapter_strength: float | None = Field(None, ge=0, le=2)
    adapter_merge: bool = True  # merge the LoRA into a second copy of the weights (Madeleine B: ~2 passes)
    # How the adapter enters the read path: "replace" puts normalize(E(q) + E_θ(q)) in place of E(q)
    # in the hybrid score; "rrf" fuses the frozen hybrid ranking with the adapter's dense ranking
    # by reciprocal rank (constant adapter_rrf_k), scores staying calibrated (dcpm.read.lanes);
    # "rrf_hybrid" fuses it with the "replace" ranking (adapter dense + lexical) instead.
    adapter_fusion: Literal["replace", "rrf", "rrf_hybrid"] = "replace"
    adapter_rrf_k: NonNegative = 60.0
    adapter_lane_weight: NonNegative = 1.0  # the associative list's votes in that fusion (frozen: 1)
    adapter_tau: Positive = 0.05
    # what the trained score is: "summed" = cos(E(q)+E_θ(q)), two passes per query (Madeleine);
    # "adapted" = cos(E_θ(q)), one pass of the merged network (dcpm.adapter.training.objective)
    adapter_query_form: Literal["summed", "adapted"] = "summed"
    adapter_lora_rank: AtLeastOne = 32
    adapter_lora_alpha: AtLeastOne = 32
    adapter_lora_dropout: Fraction = 0.1
    adapter_lr: Positive = 1e-4
    adapter_batch_size: AtLeastOne = 128
    adapter_epochs: AtLeastOne = 1
    adapter_negative_max_cos: Cosine = 0.9  # same-source facts this close to the gold are not negatives
    adapter_holdout: Fraction = 0.05  # share of personas held out for validation
    adapter_seed: Count = 0
    adapter_decontaminate_cos: Cosine = 0.85  # training rows this close to an evaluation text are dropped
    adapter_pair_max_cos: Cosine = 0.5  # later messages this close to their fact teach similarity: dropped

    # Read path (DCPM 3.1)
    # score = alpha * dense + (1 - alpha) * lexical, both absolute and in [0, 1] (dcpm.read.fusion):
    # dense = logistic((cosine - center) / width), lexical = (bm25/k)^p / (1 + (bm25/k)^p), a
    # logistic of log BM25. Measured by scripts/eval_scores.py (MiniLM, LoCoMo conversations as
    # memories): a logistic regression of "the memory asked about" against "the best match of an
    # unrelated question" puts the center at cosine 0.30; its own width (0.04) ranks badly (LoCoMo
    # R@10 0.62), 0.25 keeps the order of close candidates. The DCPM paper's alpha = 0.7 weighted
    # per-query min-max scaled scores; on these calibrated components 0.7 drops LoCoMo R@10 to 0.658.
    # p and k by scripts/eval_lexical.py (issue 15). k is in units of a rare word's IDF, which grows
    # with the points BM25 counts (dcpm.read.lexical_scale): 2.4 is 20 BM25 points among LoCoMo's
    # 6,000 turns and 12 among a new user's 200 memories. With p = 1 and a fixed k = 30 (the old
    # default) a word or two shared with many turns lifted them above a target that shares no word
    # with the query; p > 1 counts a strong match fully and a weak one little. Shipped adapter,
    # writer-disjoint held-out set, p = 2.5: cue R@10 0.113 -> 0.175, indirect 0.175 -> 0.400;
    # LoCoMo R@10 (no time signal) 0.704 -> 0.732, frozen 0.714 -> 0.741. With the cosine gate
    # below, p = 3: cue 0.263, indirect 0.425, LoCoMo 0.728 (frozen 0.735). Without the gate
    # steeper curves lose paraphrases of a small store (tests/integration/life_of_ines.py).
    hybrid_alpha: Share = 0.5
    score_dense_center: Cosine = 0.30
    score_dense_width: Positive = 0.25
    score_lexical_k: Positive = 2.4
    score_lexical_power: Positive = 3.0
    # Shared words count as far as the memory is about the same thing (dcpm.read.fusion): the
    # lexical part times a logistic of the cosine, half at 0.15 (width 0.05); "none" turns it off.
    score_lexical_gate: Cosine | None = 0.15
    score_lexical_gate_width: Positive = 0.05
    # With a model's own lexical weights (bge-m3) there is no IDF to scale by: k counts in what one
    # salient word shared by query and memory scores there, about 0.25 x 0.25 in the model card's
    # example (a strong two-to-three word match scores 0.2). Not measured here (no bge-m3 weights
    # on this machine): refit it, with the dense centre, by scripts/eval_scores.py on the model.
    score_lexical_weights_unit: Positive = 0.06
    # Hits (and context-block lines) scoring below this are left out. Measured the same way: the
    # 95th percentile of the best score an unrelated question finds among 369-689 chatty turns:
    # 0.299 frozen, 0.305 with the shipped adapter (0.336 / 0.338 at p = 2.5 without the gate and
    # 0.34; 0.364 / 0.374 at p = 1, k = 30, and 0.37). Paraphrases first and above: 0.475 / 0.450.
    search_threshold: Share = 0.31
    # AssoMem's temporal alignment, LLM-free (dcpm.read.temporal): a query that names a past time
    # ("last week", "in May 2023") or asks "when" reorders its first candidates by
    # (1 - w) * relevance + w * time signal. Weight chosen on LoCoMo conversations 0-4; on 5-9 it
    # lifts R@10 (cats 1-4) 0.700 -> 0.735, temporal questions 0.673 -> 0.770 (scripts/eval_signals.py).
    temporal_weight: Share = 0.1  # 0: off
    temporal_tolerance_days: Positive = 7.0
    temporal_rerank_depth: Count = 50
    hnsw_m: Count = 32
    hnsw_ef_construct: int = Field(128, ge=4)  # Qdrant's and pgvector's least
    hnsw_ef: AtLeastOne = 128
    hnsw_full_scan_threshold_kb: Count = 10_000
    acorn: bool = True
    candidate_pool: AtLeastOne = 100  # candidates per retriever before fusion
    optimize_after_points: Count = 5_000  # build HNSW after this many new points...
    optimize_idle_seconds: NonNegative = 30.0  # ...or after this long without writes
    # deleted points leave the vector shard once writes are quiet this long
    compact_after_delete_seconds: NonNegative = 30.0
    compact_max_delay_seconds: NonNegative = 600.0  # ...and at the latest this long after the delete

    # LLM (System 1 writer, System 2 consolidation)
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: SecretStr = SecretStr("")
    llm_timeout: Positive = 60.0
    llm_temperature: float = Field(0.0, ge=0, le=2)  # the OpenAI API's range
    llm_max_retries: Count = 3
    llm_retry_base_seconds: NonNegative = 0.5
    llm_response_format: str = "json_schema"  # json_schema | json_object | prompt: where to start
    # the model's context: prompts are cut to fit (turns stay whole in the store)
    llm_context_tokens: AtLeastOne = 8_192
    llm_answer_tokens: AtLeastOne = 1_024  # room in that context kept for the answer

    # System 1 writer (DCPM 2.2)
    writer_history_turns: Count = 6  # recent turns of the session shown to extraction
    reconcile_top_k: AtLeastOne = 5  # nearest existing items shown per extracted item
    writer_lease_seconds: Positive = 120.0
    recovery_interval_seconds: Positive = 5.0  # how often the daemon retries pending inputs
    recovery_max_backoff_seconds: NonNegative = 600.0
    writer_max_attempts: AtLeastOne = 5  # then the input is marked failed and the user's later inputs go on
    # T-Mem: extraction also writes when each item should come back; search reads them (dcpm.index.anticipation)
    anticipations: bool = True
    anticipation_terms_weight: Share = 1.0  # their BM25 against an item's own (0: their meaning only)

    # System 2 consolidation (DCPM 2.3, 3.1)
    dbscan_eps_initial: CosineDistance = 0.35  # cosine distance, first pass over all fresh items
    dbscan_eps_refine: CosineDistance = 0.25  # second pass inside over-sized clusters
    dbscan_min_samples: AtLeastOne = 3
    dbscan_max_cluster_size: AtLeastOne = 40  # clusters larger than this are split by the second pass
    consolidation_nearest_nodes: AtLeastOne = 3  # existing schema / intention nodes shown per cluster
    consolidation_max_facts_per_call: AtLeastOne = 60
    collision_min_behavior_cos: Cosine = 0.72  # phase 3: behaviourally close ...
    collision_max_semantic_cos: Cosine = 0.40  # ... semantically far
    consolidation_cron: Crontab = DEFAULT_CRON  # the daemon's nightly run (crontab syntax, local time)
    consolidation_schedule: bool = True
    consolidation_lease_seconds: Positive = 300.0  # renewed while held; a dead worker's users wait this long
    # A pass over all users (cron on several hosts, `dcpm consolidate --all`) skips a user consolidated
    # less than this long before it began, so workers started minutes apart do not redo each other's users.
    consolidation_pass_window_seconds: NonNegative = 600.0

    # Server
    host: str = "127.0.0.1"
    port: Port = 8420
    api_token: SecretStr = SecretStr("")  # the admin token (dcpm.auth); user-scoped API keys live in the store
    allow_open_network: bool = False  # serve a non-loopback address with no credential at all (explicit only)
    allowed_hosts: list[str] = []  # Host headers accepted besides loopback names and the bound address
    health_cache_seconds: NonNegative = 30.0  # /healthz probes the store, index and LLM at most this often
    max_waiting_adds: Count = 16  # adds waiting for extraction at once; more are answered 202 and extracted later
    max_waiting_adds_per_user: AtLeastOne | None = None  # of those, one user's (unset: a quarter, at least 1)
    # wrong credentials one client address may send per window; then 429 for it till the window ends (0: off)
    auth_max_failures: Count = 20
    auth_failure_window_seconds: Positive = Field(60.0, le=3_600)

    # MCP server, `dcpm mcp`
    mcp_user: str = ""  # the user every tool call acts for; empty: the client's request metadata names it
    mcp_allow_delete: bool = False  # offer the model a delete_memory tool

    # Limits
    max_text_chars: AtLeastOne = 32_000
    max_messages: AtLeastOne = 200
    max_query_chars: AtLeastOne = 4_000
    max_search_limit: AtLeastOne = 200
    max_metadata_bytes: int = Field(16_384, ge=2)  # below 2, even {} is too large
    max_body_bytes: AtLeastOne = 16_000_000
    min_free_disk_mb: Count = 256  # writes are refused below this much free space in data_dir
    import_batch_size: AtLeastOne = 200  # turns per embedding batch in `dcpm import` (at most max_messages)
    context_token_budget: Count = 1_000

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = os.environ.get("DCPM_CONFIG")
        if toml_path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(toml_path)))
        return tuple(sources)

    @field_validator("score_lexical_gate", mode="before")
    @classmethod
    def _gate_off(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in ("none", "off", "") else value

    @property
    def sqlalchemy_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'dcpm.db'}"

    def check_shared_index(self) -> None:
        """A database other processes share needs a vector index they share too: a daemon with its
        own embedded shard would miss the others' writes in search and reconciliation, and its
        deletes would leave their vectors behind (the embedded shard belongs to one process)."""
        if not self.sqlalchemy_url.startswith("sqlite") and self.vector_backend == "edge":
            raise Invalid("database_url names a shared database but the vector index is the embedded shard of "
                          "this data directory: set DCPM_INDEX_BACKEND=pgvector (vectors in that PostgreSQL) "
                          "or DCPM_QDRANT_URL to the Qdrant server every daemon shares")

    @property
    def vector_backend(self) -> str:
        """The index backend in effect: the one named, else a Qdrant server when a URL is set."""
        return self.index_backend or ("qdrant" if self.qdrant_url else "edge")

    @property
    def waiting_adds_per_user(self) -> int:
        """The waiting slots one user may hold: as set, else a quarter of them (at least one)."""
        return self.max_waiting_adds_per_user or max(1, self.max_waiting_adds // 4)

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)

    def masked(self) -> dict[str, Any]:
        """Effective settings for display: secrets shown as '***' when set."""
        shown: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "***" if value.get_secret_value() else ""
            elif "://" in str(value) and "@" in str(value):
                value = _mask_url_password(str(value))
            shown[name] = str(value) if isinstance(value, Path) else value
        return shown


def _mask_url_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def load_settings(**overrides: Any) -> Settings:
    return Settings(**overrides)
