"""Does a hubness correction recall more, or only favour turns that look out of place? Offline.

What it measures
    Dense similarity alone (no BM25, no fusion), frozen E and the shipped adapter as served, on
    three pools, with the turn's score corrected for how "central" it is among the user's
    memories. A turn's centrality r is the mean cosine of its k nearest other memories:
      csls       score = cos(q, m) - w * r(m)  (CSLS, Conneau et al. 2018: a hub close to
                 everything loses, an outlier gains)
      hubs only  score = cos(q, m) - w * max(0, r(m) - median r)  (only the most central half
                 loses; nothing gains)
    Pools:
      stitched      scripts/eval_heldout.py's haystack: each LoCoMo conversation with its own
                    inserted cue and fact turns; cue / indirect / direct Recall@10 and LoCoMo
                    evidence Recall@10 (categories 1-4), and "foreign@10": inserted turns in the
                    top 10 of LoCoMo's own questions, which are never about them
      distractors   the same, plus the other nine conversations' inserted turns (same writer,
                    same register, other content; scripts/eval_heldout.py --distractors);
                    "foreign@10" is then distractors in the top 10 of the cue and fact queries
      personas      scripts/eval_associative.py's held-out personas: every candidate is a fact of
                    one writer's register, nothing is out of place; later-message R@10, direct R@1
    Inserted turns are written in another register than LoCoMo's, so their neighbours are far and
    r is low: CSLS lifts them for any query. A correction that recalls by association should gain
    in all three pools, not only in the stitched one.

Run
    . .venv/bin/activate
    python scripts/eval_hubness.py          # about 4 minutes on 2 cores
"""

from __future__ import annotations

import json
from collections import defaultdict

import eval_heldout as heldout
import numpy as np
from eval_locomo import evidence_ids, normalize_id

K = 10
CORRECTIONS = [("none", 0, 0.0)] + [(kind, k, w) for kind in ("csls", "hubs only") for k in (10,)
                                    for w in (0.5, 1.0)]


def centrality(memories: np.ndarray, k: int) -> np.ndarray:
    """Mean cosine of each memory's k nearest other memories."""
    sims = memories @ memories.T
    np.fill_diagonal(sims, -1.0)
    return np.sort(sims, axis=1)[:, -k:].mean(axis=1)


def corrected(queries: np.ndarray, memories: np.ndarray, kind: str, k: int, w: float) -> np.ndarray:
    scores = queries @ memories.T
    if kind == "none":
        return scores
    r = centrality(memories, k)
    penalty = r if kind == "csls" else np.maximum(0.0, r - np.median(r))
    return scores - w * penalty[None, :]


def conversations(embedder, adapter) -> list[dict]:
    """Per conversation: memory vectors (own turns, then distractors), query vectors per encoder,
    and each query's set and target positions."""
    samples = json.loads(heldout.DEFAULT_DATA.read_text(encoding="utf-8"))
    sets = heldout.load_heldout(heldout.HELDOUT, None)
    out = []
    for sample in samples:
        others = [(other, sets[other["sample_id"]]) for other in samples if other is not sample]
        own = heldout.conversation_turns(sample, sets[sample["sample_id"]])
        moved = heldout.distractor_turns(sample, others)
        texts = [f"{t.speaker}: {t.text}" for t in own] + [f"{ins['speaker']}: {ins['text']}" for _, ins in moved]
        position = {normalize_id(t.id) or t.id: n for n, t in enumerate(own)}
        inserted = {position[turn_id] for turn_id, _ in heldout.inserted_turns(sets[sample["sample_id"]])}
        asked = [(q["set"], q["text"], [position[q["target"]]]) for q in heldout.queries(sets[sample["sample_id"]])]
        for qa in sample["qa"]:
            gold = [position[e] for e in evidence_ids(qa.get("evidence", [])) if e in position]
            if gold and qa.get("category") in (1, 2, 3, 4):
                asked.append(("locomo", qa["question"], gold))
        questions = [text for _, text, _ in asked]
        out.append({"memories": embedder.encode_documents(texts).dense, "own": len(own), "inserted": inserted,
                    "labels": [(name, gold) for name, _, gold in asked],
                    "queries": {"frozen": embedder.dense_queries(questions),
                                "adapter": adapter.dense_queries(questions)}})
        print(f"{sample['sample_id']}: {len(own)} turns, {len(moved)} distractors", flush=True)
    return out


def stitched_recall(convs: list[dict], kind: str, k: int, w: float, distractors: bool) -> dict:
    found = defaultdict(list)
    for conv in convs:
        memories = conv["memories"] if distractors else conv["memories"][:conv["own"]]
        for encoder, queries in conv["queries"].items():
            top = np.argsort(-corrected(queries, memories, kind, k, w), axis=1)[:, :K]
            for row, (name, gold) in enumerate(conv["labels"]):
                found[(name, encoder)].append(float(any(g in top[row] for g in gold)))
                shown = set(top[row].tolist())
                if name == "locomo" and not distractors:
                    found[("foreign@10", encoder)].append(len(shown & conv["inserted"]))
                elif name != "locomo" and distractors:
                    found[("foreign@10", encoder)].append(sum(m >= conv["own"] for m in shown))
    return {key: float(np.mean(values)) for key, values in found.items()}


def persona_recall(kind: str, k: int, w: float, pool: dict) -> dict:
    """Later-message R@10 and direct R@1 among each source's held-out facts (eval_associative)."""
    from dcpm.adapter.training.evaluation import evaluate

    sources = np.array([fact.source for fact in pool["facts"]])
    penalty = np.zeros(len(sources))
    if kind != "none":
        for source in set(sources):
            at = np.flatnonzero(sources == source)
            r = centrality(pool["bank"][at], k)
            penalty[at] = r if kind == "csls" else np.maximum(0.0, r - np.median(r))
    bank = np.hstack([pool["bank"], -w * penalty[:, None]])  # q' . m' = q . m - w * penalty(m)
    queries = {name: np.hstack([v, np.ones((len(v), 1), dtype=v.dtype)]) for name, v in pool["queries"].items()}
    report = evaluate(pool["facts"], pool["rows"], bank, queries)
    return {(f"persona {what}", "frozen" if name == "frozen" else "adapter"): report[name]["all"][what][metric]
            for name in ("frozen", "adapter") for what, metric in (("later", "R@10"), ("direct", "R@1"))}


def persona_pool(embedder, adapter) -> dict:
    from eval_associative import DEFAULT_CORPUS

    from dcpm.adapter import SHIPPED_ADAPTER
    from dcpm.adapter.manifest import read_manifest
    from dcpm.adapter.training.evaluation import cue_set, query_vectors
    from dcpm.adapter.training.lives import read_lives

    held = set(read_manifest(SHIPPED_ADAPTER).training.heldout_personas)
    lives = read_lives([DEFAULT_CORPUS])
    facts, rows = cue_set([life for life in lives if life.persona_id not in held],
                          [life for life in lives if life.persona_id in held], "heldout")
    return {"facts": facts, "rows": rows, "bank": embedder.dense([fact.text for fact in facts]),
            "queries": query_vectors(rows, {"frozen": embedder.dense_queries, "adapter": adapter.dense_queries})}


def main() -> int:
    from dcpm.adapter import SHIPPED_ADAPTER
    from dcpm.adapter.encoder import AssociativeQueryEncoder
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    embedder = load_embedder(Settings(query_threads=2))
    adapter = AssociativeQueryEncoder(embedder, SHIPPED_ADAPTER)
    convs, pool = conversations(embedder, adapter), persona_pool(embedder, adapter)
    columns = [("stitched", "cue"), ("stitched", "indirect"), ("stitched", "direct"), ("stitched", "locomo"),
               ("stitched", "foreign@10"), ("distractors", "cue"), ("distractors", "indirect"),
               ("distractors", "direct"), ("distractors", "foreign@10"), ("personas", "persona later"),
               ("personas", "persona direct")]
    print("\nfrozen / adapter; R@10 unless named (persona direct: R@1); foreign@10: turns per query")
    print("| correction | " + " | ".join(f"{pool_name} {metric}" for pool_name, metric in columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for kind, k, w in CORRECTIONS:
        numbers = {"stitched": stitched_recall(convs, kind, k, w, distractors=False),
                   "distractors": stitched_recall(convs, kind, k, w, distractors=True),
                   "personas": persona_recall(kind, k, w, pool)}
        cells = [f"{numbers[pool_name][(metric, 'frozen')]:.3f} / {numbers[pool_name][(metric, 'adapter')]:.3f}"
                 for pool_name, metric in columns]
        label = "none" if kind == "none" else f"{kind} k={k} w={w}"
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
