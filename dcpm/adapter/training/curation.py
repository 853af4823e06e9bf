"""Corpus curation (Madeleine 4.2, appendix A): statistics, the similarity filter, decontamination.

A later message that is close to its earlier statement under E teaches similarity, which E
already has, not association; and no training text may be close to an evaluation text. All
functions take `embed` (texts -> unit rows, the frozen E) so they run on any corpus file,
hand-written or simulated, without an LLM.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from dcpm.adapter.training.lives import Life, Statement

Embed = Callable[[Sequence[str]], np.ndarray]


def pair_cosines(lives: Sequence[Life], embed: Embed) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per statement (in corpus order): cosines of its later messages, and of its direct question."""
    statements = [s for life in lives for s in life.facts]
    facts = embed([s.fact for s in statements])
    later = embed([text for s in statements for text in s.later])
    directs = embed([s.direct or "" for s in statements])
    cut = np.cumsum([0] + [len(s.later) for s in statements])
    later_cos = [later[cut[i]:cut[i + 1]] @ facts[i] for i in range(len(statements))]
    direct_cos = [np.array([directs[i] @ facts[i]]) if s.direct else np.zeros(0) for i, s in enumerate(statements)]
    return later_cos, direct_cos


def corpus_stats(lives: Sequence[Life], embed: Embed) -> dict[str, dict[str, float]]:
    """Per source and overall: personas, facts, rows, mean earlier-later and fact-question cosine."""
    later_cos, direct_cos = pair_cosines(lives, embed)
    sources = [life.source for life in lives for _ in life.facts]
    stats = {}
    for source in [*sorted(set(sources)), "all"]:
        chosen = [i for i, s in enumerate(sources) if source in ("all", s)]
        later = np.concatenate([later_cos[i] for i in chosen] or [np.zeros(0)])
        direct = np.concatenate([direct_cos[i] for i in chosen] or [np.zeros(0)])
        stats[source] = {
            "personas": sum(1 for life in lives if source in ("all", life.source)),
            "facts": len(chosen), "later": int(len(later)), "direct": int(len(direct)),
            "rows": int(len(later) + len(direct)),
            "later_cos_mean": round(float(later.mean()), 3) if len(later) else float("nan"),
            "later_cos_p95": round(float(np.percentile(later, 95)), 3) if len(later) else float("nan"),
            "later_cos_max": round(float(later.max()), 3) if len(later) else float("nan"),
            "direct_cos_mean": round(float(direct.mean()), 3) if len(direct) else float("nan"),
        }
    return stats


def drop_similar_pairs(lives: Sequence[Life], embed: Embed, max_cos: float) -> tuple[list[Life], Counter]:
    """Remove later messages whose cosine to their own statement is at least `max_cos`.
    Direct questions stay: they are meant to be similar and keep ordinary lookup in training."""
    later_cos, _ = pair_cosines(lives, embed)
    dropped: Counter = Counter()
    kept_lives, position = [], 0
    for life in lives:
        statements = []
        for statement in life.facts:
            keep = [text for text, cos in zip(statement.later, later_cos[position]) if cos < max_cos]
            dropped[life.source] += len(statement.later) - len(keep)
            statements.append(statement.model_copy(update={"later": keep}))
            position += 1
        kept_lives.append(life.model_copy(update={"facts": statements}))
    return kept_lives, dropped


def evaluation_texts(path: Path) -> list[str]:
    """Texts a training row must not resemble: LoCoMo json (every turn text and question), a
    held-out set of scripts/heldout (every cue, trigger, fact and question), a JSONL file with a
    "text" or "question" field per line, or plain text, one per line."""
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        samples = json.loads(raw)
        if isinstance(samples, dict) and "cue_pairs" in samples:
            return ([pair[side]["text"] for pair in samples["cue_pairs"] for side in ("cue", "trigger")]
                    + [item[side]["text"] for item in samples.get("indirect_facts", [])
                       for side in ("fact", "indirect", "direct")])
        texts = [qa["question"] for sample in samples for qa in sample.get("qa", [])]
        for sample in samples:
            conversation = sample.get("conversation", {})
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    texts.extend(turn["text"] for turn in turns if turn.get("text"))
        return texts
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
        return [row.get("text") or row.get("question") for row in rows if row.get("text") or row.get("question")]
    return [line.strip() for line in raw.splitlines() if line.strip()]


def nearest_cosine(vectors: np.ndarray, reference: np.ndarray, chunk: int = 2048) -> np.ndarray:
    if len(vectors) == 0 or len(reference) == 0:
        return np.full(len(vectors), -1.0)
    return np.concatenate([(vectors[i:i + chunk] @ reference.T).max(axis=1) for i in range(0, len(vectors), chunk)])


def decontaminate(lives: Sequence[Life], embed: Embed, reference: np.ndarray,
                  max_cos: float) -> tuple[list[Life], Counter]:
    """Drop every row with cosine >= `max_cos` to any reference (evaluation) vector: a
    contaminated later message or direct question goes alone; a contaminated fact takes its
    whole statement (every row pointing to it) along."""
    statements = [s for life in lives for s in life.facts]
    fact_hit = nearest_cosine(embed([s.fact for s in statements]), reference) >= max_cos
    queries = [[*s.later, *([s.direct] if s.direct else [])] for s in statements]
    query_hit = nearest_cosine(embed([q for group in queries for q in group]), reference) >= max_cos
    dropped: Counter = Counter()
    kept_lives, position, cursor = [], 0, 0
    for life in lives:
        kept: list[Statement] = []
        for statement in life.facts:
            hits = query_hit[cursor:cursor + len(queries[position])]
            cursor += len(queries[position])
            if fact_hit[position]:
                dropped[f"{life.source}:statements"] += 1
                dropped[f"{life.source}:rows"] += len(hits)
            else:
                later = [t for t, hit in zip(statement.later, hits) if not hit]
                direct = statement.direct if statement.direct and not hits[len(statement.later):].any() else None
                dropped[f"{life.source}:rows"] += int(hits.sum())
                kept.append(statement.model_copy(update={"later": later, "direct": direct}))
            position += 1
        kept_lives.append(life.model_copy(update={"facts": kept}))
    return kept_lives, dropped
