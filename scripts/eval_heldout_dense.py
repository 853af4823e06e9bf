"""Where associative recall is lost: the held-out set ranked by dense similarity alone, offline.

What it measures
    The same haystack and queries as scripts/eval_heldout.py (the ten LoCoMo conversations with
    the cue and fact turns of scripts/heldout/ inserted), but without the service: each turn is
    embedded as the index embeds it ("speaker: text"), and each query ranks its own conversation's
    turns by cosine alone, with the frozen encoder E and with the shipped adapter (as served:
    normalize(E(q) + E_θ(q))). No BM25, no fusion, no time signal. Two ways to score a turn:
      whole     the turn's own vector (what the index holds)
      sentence  its best sentence: each turn split after . ! ? and at line breaks, every piece
                embedded, the turn scored by its most similar piece (a cue said in a clause of a
                long message is diluted in the whole turn's vector; is it found by its clause?)
    Reported: cue, indirect and direct Recall@10, and LoCoMo evidence Recall@10 of categories 1-4
    (a question counts when any evidence turn is in the top 10, as scripts/eval_locomo.py counts).
    Set beside eval_heldout.py's numbers, the gap is what the hybrid score's lexical half does to
    queries that share no word with their target.

    --embedder names another encoder (a local model folder): its frozen columns only, since the
    shipped adapter serves only the backbone it was trained on.

Run
    . .venv/bin/activate
    python scripts/eval_heldout_dense.py          # about 3 minutes on 2 cores
    python scripts/eval_heldout_dense.py --embedder /path/to/all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict

import eval_heldout as heldout
import numpy as np
from eval_locomo import evidence_ids, normalize_id

K = 10
PIECES = re.compile(r"(?<=[.!?])\s+|\n+")


def pieces(text: str) -> list[str]:
    return [p.strip() for p in PIECES.split(text) if p.strip()] or [text]


def best_piece_scores(queries: np.ndarray, piece_vectors: np.ndarray, owner: np.ndarray, turns: int) -> np.ndarray:
    """(queries x turns): each turn's best cosine over its pieces (pieces are listed turn by turn)."""
    starts = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]
    scores = np.full((len(queries), turns), -1.0, dtype=np.float32)
    scores[:, owner[starts]] = np.maximum.reduceat(queries @ piece_vectors.T, starts, axis=1)
    return scores


def main() -> int:
    from dcpm.adapter import SHIPPED_ADAPTER
    from dcpm.adapter.encoder import AssociativeQueryEncoder
    from dcpm.adapter.manifest import mismatch, read_manifest
    from dcpm.config import DEFAULT_EMBEDDER, Settings
    from dcpm.embedding import load_embedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="Settings.embedder (name or path)")
    args = parser.parse_args()
    embedder = load_embedder(Settings(query_threads=2, embedder=args.embedder))
    fits = mismatch(read_manifest(SHIPPED_ADAPTER), embedder) is None
    adapter = AssociativeQueryEncoder(embedder, SHIPPED_ADAPTER) if fits else None
    encoders = ("frozen", "adapter") if fits else ("frozen",)
    samples = json.loads(heldout.DEFAULT_DATA.read_text(encoding="utf-8"))
    sets = heldout.load_heldout(heldout.HELDOUT, None)
    found: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for sample in samples:
        turns = heldout.conversation_turns(sample, sets[sample["sample_id"]])
        texts = [f"{t.speaker}: {t.text}" for t in turns]
        position = {normalize_id(t.id) or t.id: n for n, t in enumerate(turns)}  # LoCoMo ids as evidence names them
        whole = embedder.encode_documents(texts).dense
        split = [(n, piece) for n, text in enumerate(texts) for piece in pieces(text)]
        owner = np.array([n for n, _ in split])
        piece_vectors = embedder.encode_documents([piece for _, piece in split]).dense
        asked = heldout.queries(sets[sample["sample_id"]])
        locomo = [(qa["question"], {e for e in evidence_ids(qa.get("evidence", [])) if e in position})
                  for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4)]
        locomo = [(question, evidence) for question, evidence in locomo if evidence]
        texts_asked = [q["text"] for q in asked] + [question for question, _ in locomo]
        for encoder in encoders:
            vectors = (adapter if encoder == "adapter" else embedder).dense_queries(texts_asked)
            for scoring, scores in (("whole", vectors @ whole.T),
                                    ("sentence", best_piece_scores(vectors, piece_vectors, owner, len(turns)))):
                top = np.argsort(-scores, axis=1)[:, :K]
                for row, query in enumerate(asked):
                    found[(query["set"], encoder, scoring)].append(float(position[query["target"]] in top[row]))
                for row, (_, evidence) in enumerate(locomo, start=len(asked)):
                    hit = any(position[e] in top[row] for e in evidence)
                    found[("locomo 1-4", encoder, scoring)].append(float(hit))
        print(f"{sample['sample_id']}: {len(turns)} turns, {len(split)} pieces", flush=True)
    columns = [(e, s) for e in encoders for s in ("whole", "sentence")]
    print(f"\n| set | n | {' | '.join(f'{e} {s}' for e, s in columns)} |")
    print("| --- | --- |" + " --- |" * len(columns))
    for name in ("cue", "indirect", "direct", "locomo 1-4"):
        cells = [np.mean(found[(name, e, s)]) for e, s in columns]
        print(f"| {name} | {len(found[(name, 'frozen', 'whole')])} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
