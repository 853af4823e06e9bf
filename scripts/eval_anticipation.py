"""What write-time anticipations (T-Mem) would add to associative recall, offline, dense cosine only.

What it measures
    The same haystack and queries as `scripts/eval_heldout.py --distractors` (the ten LoCoMo
    conversations, each with its own cue and fact turns and the 108 of the nine others inserted),
    ranked by cosine alone as `scripts/eval_heldout_dense.py` ranks them, with the frozen encoder
    and with the shipped adapter. Every inserted turn, target or distractor, also carries what an
    extraction model wrote for it at write time (scripts/heldout/anticipations.jsonl): one to three
    items (facts) and four to six anticipations, situations in which the memory should come back
    though the later message may not mention it. A turn scores its best cosine over:
      turn          its own vector (what the index holds today)
      +items        and its items' vectors
      +anticipations  and each anticipation's vector
      -0.1          the same, an anticipation's cosine counted 0.1 lower
      +joined       and one vector of all its anticipations embedded as one text (one extra vector
                    per memory: what an index would store)
    Only the inserted turns carry items and anticipations, so against LoCoMo's own turns they get
    extra chances that a store where every memory has them would not give: the "(inserted only)"
    rows rank each target among the 120 inserted turns of its conversation alone, where every
    candidate has them, and "inserted turns in a LoCoMo question's top 10" shows how far they
    intrude on ordinary questions.

How the anticipations were written
    A capable model played the extraction LLM, blind: it saw only the 120 cue and fact messages
    (speaker and text, shuffled), not the conversations, the triggers or the questions, and wrote
    each line for its message. A small local model would write weaker ones; that is not measured.

Run
    . .venv/bin/activate
    python scripts/eval_anticipation.py          # about 4 minutes on 2 cores

Results: scripts/heldout/README.md, "Write-time anticipations".
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import eval_heldout as heldout
import numpy as np
from eval_locomo import evidence_ids, normalize_id

K = 10
ANTICIPATIONS = heldout.HELDOUT / "anticipations.jsonl"
VARIANTS = ("turn", "+items", "+anticipations", "-0.1", "+joined")
ROWS = ("cue", "indirect", "direct", "cue (inserted only)", "indirect (inserted only)", "direct (inserted only)",
        "locomo 1-4")


def load(path: Path) -> dict[str, dict]:
    return {record["id"]: record for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def best_of(scores: np.ndarray, owner: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """(queries x turns): each turn's best of its own score and its extra vectors' (`owner[i]`
    is the turn of extra column i)."""
    best = scores.copy()
    np.maximum.at(best.T, owner, extra.T)
    return best


def variants(queries: np.ndarray, whole: np.ndarray, extras: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    base = queries @ whole.T
    items, anticipations, joined = (extras[k] for k in ("items", "anticipations", "joined"))
    with_items = best_of(base, items[0], queries @ items[1].T)
    return {"turn": base, "+items": with_items,
            "+anticipations": best_of(with_items, anticipations[0], queries @ anticipations[1].T),
            "-0.1": best_of(with_items, anticipations[0], queries @ anticipations[1].T - 0.1),
            "+joined": best_of(with_items, joined[0], queries @ joined[1].T)}


def main() -> int:
    from dcpm.adapter import SHIPPED_ADAPTER
    from dcpm.adapter.encoder import AssociativeQueryEncoder
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    written = load(ANTICIPATIONS)
    embedder = load_embedder(Settings(query_threads=2))
    encoders = {"frozen": embedder, "adapter": AssociativeQueryEncoder(embedder, SHIPPED_ADAPTER)}
    samples = json.loads(heldout.DEFAULT_DATA.read_text(encoding="utf-8"))
    sets = heldout.load_heldout(heldout.HELDOUT, None)
    by_id = {sample["sample_id"]: sample for sample in samples}
    found: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    intruders: dict[tuple[str, str], list[int]] = defaultdict(list)
    for sample in samples:
        sample_id = sample["sample_id"]
        others = [(by_id[other], sets[other]) for other in sets if other != sample_id]
        turns = heldout.conversation_turns(sample, sets[sample_id], heldout.distractor_turns(sample, others))
        position = {normalize_id(t.id) or t.id: n for n, t in enumerate(turns)}
        record_of = {n: written[str(t.id).split("/")[-1]] for n, t in enumerate(turns)
                     if str(t.id).split("/")[-1] in written}  # a distractor's id is "conv-x/its own id"
        inserted = np.array(sorted(record_of))
        whole = embedder.encode_documents([f"{t.speaker}: {t.text}" for t in turns]).dense
        owned = {"items": [(n, text) for n in inserted for text in record_of[n]["items"]],
                 "anticipations": [(n, text) for n in inserted for text in record_of[n]["anticipations"]],
                 "joined": [(n, " ".join(record_of[n]["anticipations"])) for n in inserted]}
        extras = {name: (np.array([n for n, _ in pairs]), embedder.encode_documents([t for _, t in pairs]).dense)
                  for name, pairs in owned.items()}
        asked = heldout.queries(sets[sample_id])
        locomo = [(qa["question"], {e for e in evidence_ids(qa.get("evidence", [])) if e in position})
                  for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4)]
        locomo = [(question, evidence) for question, evidence in locomo if evidence]
        texts = [q["text"] for q in asked] + [question for question, _ in locomo]
        for encoder_name, encoder in encoders.items():
            for variant, scores in variants(encoder.dense_queries(texts), whole, extras).items():
                top = np.argsort(-scores, axis=1)[:, :K]
                for row, query in enumerate(asked):
                    target = position[query["target"]]
                    among = inserted[np.argsort(-scores[row, inserted])][:K]
                    found[(query["set"], encoder_name, variant)].append(float(target in top[row]))
                    found[(f"{query['set']} (inserted only)", encoder_name, variant)].append(float(target in among))
                for row, (_, evidence) in enumerate(locomo, start=len(asked)):
                    found[("locomo 1-4", encoder_name, variant)].append(float(bool(evidence & {
                        t for t, n in position.items() if n in set(top[row])})))
                    intruders[(encoder_name, variant)].append(len(set(top[row]) & set(inserted)))
        print(f"{sample_id}: {len(turns)} turns, {len(inserted)} inserted", flush=True)
    columns = [(e, v) for e in encoders for v in VARIANTS]
    print("\nRecall@10, dense cosine only, with the same-writer distractors\n")
    print("| set | n | " + " | ".join(f"{e} {v}" for e, v in columns) + " |")
    print("| --- | --- |" + " --- |" * len(columns))
    for name in ROWS:
        cells = [np.mean(found[(name, e, v)]) for e, v in columns]
        print(f"| {name} | {len(found[(name, 'frozen', 'turn')])} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    cells = [np.mean(intruders[(e, v)]) for e, v in columns]
    print("| inserted turns in a LoCoMo question's top 10 | | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
