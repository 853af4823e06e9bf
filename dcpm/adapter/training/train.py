"""Training the associative query adapter (Madeleine 4.4, appendix B); `dcpm adapter train` runs it.

Only the query side learns: E_θ is a LoRA on a copy of the frozen embedder E. The memory bank
is every training fact, encoded once by E, and E(q) of every row is computed once too, since
neither changes; each step then encodes the batch with E_θ and minimizes InfoNCE on the
summed score over the row's same-source facts. `dcpm adapter train` (and its process entry
point `workers/train_adapter.py`) runs it.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from dcpm.adapter.manifest import AdapterManifest, TrainingRecord, backbone_of, write_manifest
from dcpm.adapter.training.evaluation import cue_set, evaluate, query_vectors
from dcpm.adapter.training.lives import Fact, Life, Row, facts_and_rows, rows_hash, split_personas
from dcpm.adapter.training.objective import QUERY_FORMS, allowed_candidates, infonce_loss, served_scores
from dcpm.config import Settings
from dcpm.embedding.base import AdaptableEmbedder
from dcpm.errors import Invalid

Progress = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True)
class TrainingPlan:
    """The hyperparameters; defaults come from settings, which carry the paper's values."""

    tau: float
    rank: int
    alpha: int
    dropout: float
    lr: float
    batch_size: int
    epochs: int
    negative_max_cos: float
    holdout: float
    seed: int
    max_steps: int | None = None  # stop early (smoke tests); None: the full epochs
    query_form: str = "summed"  # dcpm.adapter.training.objective.served_scores

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> "TrainingPlan":
        plan = cls(tau=settings.adapter_tau, rank=settings.adapter_lora_rank, alpha=settings.adapter_lora_alpha,
                   dropout=settings.adapter_lora_dropout, lr=settings.adapter_lr,
                   batch_size=settings.adapter_batch_size, epochs=settings.adapter_epochs,
                   negative_max_cos=settings.adapter_negative_max_cos, holdout=settings.adapter_holdout,
                   seed=settings.adapter_seed, query_form=settings.adapter_query_form)
        plan = replace(plan, **{k: v for k, v in overrides.items() if v is not None})
        if plan.query_form not in QUERY_FORMS:
            raise Invalid(f"query form {plan.query_form!r} is not one of {', '.join(QUERY_FORMS)}")
        return plan


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_mode(model: Any) -> None:
    """Dropout only in the LoRA branch. The frozen network stays in eval mode: E(q) in the summed
    score is computed without dropout, and dropout inside E_θ's frozen layers would be noise that
    the served model never sees (it cut memorization of training pairs by a third in our runs)."""
    model.eval()
    for name, module in model.named_modules():
        if name.endswith("lora_dropout"):
            module.train()


def fit(embedder: AdaptableEmbedder, facts: Sequence[Fact], rows: Sequence[Row], plan: TrainingPlan,
        progress: Progress | None = None) -> tuple[Any, int]:
    """E_θ trained on `rows`; returns the peft model (eval mode) and the number of steps taken."""
    import torch

    from dcpm.adapter.lora import attach_lora
    from dcpm.embedding.flag_dense import MAX_TOKENS, pool

    seed_everything(plan.seed)
    device = embedder.device
    bank = torch.from_numpy(embedder.dense([fact.text for fact in facts])).to(device)
    frozen = torch.from_numpy(embedder.dense_queries([row.query for row in rows])).to(device)
    allowed = torch.from_numpy(allowed_candidates(bank.cpu().numpy(), [f.source for f in facts],
                                                  plan.negative_max_cos)).to(device)
    gold = torch.tensor([row.fact for row in rows], device=device)
    model = attach_lora(embedder.model, plan.rank, plan.alpha, plan.dropout).to(device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=plan.lr)
    order = np.random.default_rng(plan.seed)
    per_epoch = math.ceil(len(rows) / plan.batch_size)
    total = per_epoch * plan.epochs if plan.max_steps is None else min(plan.max_steps, per_epoch * plan.epochs)
    step = 0
    train_mode(model)
    for _ in range(plan.epochs):
        shuffled = order.permutation(len(rows))
        for start in range(0, len(rows), plan.batch_size):
            if step >= total:
                break
            batch = torch.from_numpy(shuffled[start:start + plan.batch_size]).to(device)
            tokens = embedder.tokenizer([embedder.query_instruction + rows[i].query for i in batch.tolist()],
                                        padding=True, truncation=True, max_length=MAX_TOKENS,
                                        return_tensors="pt").to(device)
            hidden = model(**tokens, return_dict=True).last_hidden_state
            adapted = pool(hidden, tokens["attention_mask"], embedder.pooling)
            scores = served_scores(plan.query_form, frozen[batch], adapted, bank)
            loss = infonce_loss(scores, gold[batch], allowed[gold[batch]], plan.tau)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if progress:
                progress(step, total, float(loss.detach()))
    return model.eval(), step


def validate(embedder: AdaptableEmbedder, model: Any, training: Sequence[Life], heldout: Sequence[Life],
             form: str = "summed") -> dict:
    """Frozen E against E + adapter on the held-out personas (see dcpm.adapter.training.evaluation)."""
    from dcpm.adapter.encoder import associative_vectors

    if not heldout:
        return {}
    facts, rows = cue_set(training, heldout, "all")  # held-out facts first, then training facts
    bank = embedder.dense([fact.text for fact in facts])
    encoders = {"frozen": embedder.dense_queries,
                "adapter": lambda texts: associative_vectors(embedder, model, texts, form)}
    queries = query_vectors(rows, encoders)
    held = len(cue_set(training, heldout, "heldout")[0])
    return {"heldout": evaluate(facts[:held], rows, bank[:held], queries),
            "heldout_and_training": evaluate(facts, rows, bank, queries)}


def save_lora(model: Any, backbone: str, output: Path) -> None:
    """peft's files, naming the backbone rather than this machine's path to it; the manifest,
    not peft's empty model card, documents the adapter."""
    card = output / "README.md"
    had_card = card.exists()
    model.peft_config["default"].base_model_name_or_path = backbone
    # save_embedding_layers="auto" would ask the hub whether the vocabulary changed; it never does here.
    model.save_pretrained(str(output), save_embedding_layers=False)
    if not had_card:
        card.unlink(missing_ok=True)


def train(embedder: AdaptableEmbedder, lives: Sequence[Life], plan: TrainingPlan, output: Path, *,
          name: str | None = None, corpus_files: Sequence[Path] = (),
          progress: Progress | None = None) -> AdapterManifest:
    """Split, train, validate and write the adapter directory (peft files + manifest)."""
    training, heldout = split_personas(lives, plan.holdout, plan.seed)
    facts, rows = facts_and_rows(training)
    if not rows:
        raise Invalid("the corpus has no training rows (later messages or direct questions)")
    started = time.perf_counter()
    model, steps = fit(embedder, facts, rows, plan, progress)
    seconds = time.perf_counter() - started
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    save_lora(model, embedder.name, output)
    manifest = AdapterManifest(
        name=name or output.name,
        backbone=backbone_of(embedder),
        training=TrainingRecord(
            corpus_files=[Path(p).name for p in corpus_files], data_hash=rows_hash(facts, rows),
            personas=len(training), facts=len(facts), rows=len(rows),
            heldout_personas=[life.persona_id for life in heldout], hyperparameters=asdict(plan),
            steps=steps, seconds=round(seconds, 1), device=str(embedder.device)),
        metrics=validate(embedder, model, training, heldout, plan.query_form),
    )
    write_manifest(output, manifest)
    return manifest
