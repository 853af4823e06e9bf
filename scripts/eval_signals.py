"""Do AssoMem's other read-path signals help? Temporal alignment and PPR importance
(dcpm.read.signals) as rerankers of the real search, on LoCoMo and on the held-out associative set.

What it measures
    Every LoCoMo conversation is imported through the real service as scripts/eval_locomo.py does
    (raw turns, captions, session dates), and, as a second user per conversation, the same
    conversation with scripts/heldout's cue and fact turns inserted (scripts/eval_heldout.py).
    Each question is searched once (frozen encoder, kinds=["raw"], limit 50, threshold 0); its
    50 candidates keep their calibrated score (relevance), timestamp, session, import position,
    text and vector. Each signal then reranks them: final = (1 - w) * relevance + w * signal.
      temporal    exp(-days outside the span the question names / tolerance); 0 when it names none
      when        for a "When did..." question, 1 for a candidate that places something in time
      time        the larger of temporal and when
      importance  personalized PageRank over the candidates, seeded by relevance (AssoMem eq. 2,
                  damping 0.85); edges: turns of one session at most `window` apart ("nearby"),
                  cosine above gamma ("similar", AssoMem eq. 1), or both
      both        (1 - wt - wi) * relevance + wt * time + wi * importance, the dev-best of each
    "Now" is the last session's date for LoCoMo questions and the session date of the trigger or
    question for the held-out set. Weights and parameters are picked on conversations 0-4 (dev,
    pooled R@10 of categories 1-4, then R@5, R@1) and reported on conversations 5-9 (test) and on
    the held-out set (never tuned on). A question is a hit at K when any evidence turn is in the top K.

Run
    . .venv/bin/activate
    python scripts/eval_signals.py --cache /tmp/signals.pkl     # builds and caches the candidates
    python scripts/eval_signals.py --cache /tmp/signals.pkl     # a re-run only reranks
    python scripts/eval_signals.py --conversations 4 --no-heldout   # quick
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_heldout
import eval_locomo

from dcpm.read import signals

KS = (1, 5, 10)
LIMIT = 50
WEIGHTS = (0.05, 0.1, 0.2, 0.3, 0.5)
TOLERANCES = (7.0, 30.0)
GAMMAS = (0.5, 0.6, 0.7)
WINDOWS = (1, 3)
DEV = 5  # conversations [0, DEV) pick, the rest report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", type=Path, default=eval_locomo.DEFAULT_DATA)
    p.add_argument("--conversations", type=int, default=None, metavar="N", help="only the first N")
    p.add_argument("--no-heldout", action="store_true", help="LoCoMo questions only")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--cache", type=Path, default=None, help="pickle of the candidates: read if it exists, else written")
    p.add_argument("--json", type=Path, default=None, metavar="OUT")
    return p.parse_args(argv)


# --- candidates through the real service ----------------------------------------------------
def session_dates(sample: dict) -> dict[str, datetime]:
    conv = sample["conversation"]
    return {key: datetime.strptime(conv[f"{key}_date_time"], eval_locomo.DATE_FORMAT)
            for key in conv if eval_locomo.SESSION_KEY.match(key)}


def import_user(svc, user_id: str, turns: list) -> dict[str, int]:
    """Import one user's turns; returns {memory id: import position} (what the store's order gives)."""
    from dcpm.write.raw import deterministic_raw_id

    for turn in turns:
        turn.id = deterministic_raw_id(user_id, turn, 0)
    batch = min(svc.settings.import_batch_size, svc.settings.max_messages)
    for start in range(0, len(turns), batch):
        svc.import_turns(user_id, turns[start:start + batch])
    return {turn.id: n for n, turn in enumerate(turns)}


def candidates(svc, user_id: str, query: str, positions: dict[str, int]) -> dict:
    from dcpm.api.models import SearchRequest

    hits = svc.search(SearchRequest(user_id=user_id, query=query, limit=LIMIT, kinds=["raw"], threshold=0)).hits
    ids = [h.id for h in hits]
    vectors = svc.index.dense_vectors(ids)
    matrix = np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, 1), dtype=np.float32)
    return {"dia": [h.metadata.get("dia_id") for h in hits], "score": np.array([h.score for h in hits]),
            "time": [h.timestamp for h in hits], "text": [h.text for h in hits],
            "place": [(h.session_id, positions.get(h.id, 0)) for h in hits],
            "cosine": (matrix @ matrix.T).astype(np.float32)}


def build(args: argparse.Namespace, samples: list[dict]) -> list[dict]:
    import torch

    from dcpm.config import Settings
    from dcpm.service import MemoryService

    torch.set_num_threads(args.threads)
    heldout = {} if args.no_heldout else eval_heldout.load_heldout(eval_heldout.HELDOUT, None)
    data_dir = Path(tempfile.mkdtemp(prefix="dcpm-signals-"))
    rows: list[dict] = []
    svc = MemoryService(Settings(data_dir=data_dir, query_adapter="none"))
    try:
        started = time.perf_counter()
        places = {}
        for sample in samples:
            sid = sample["sample_id"]
            places[sid] = import_user(svc, sid, eval_locomo.conversation_turns(sample))
            if sid in heldout:
                places[f"heldout-{sid}"] = import_user(svc, f"heldout-{sid}",
                                                       eval_heldout.conversation_turns(sample, heldout[sid]))
        svc.index.optimize()
        print(f"imported {sum(map(len, places.values()))} turns in {time.perf_counter() - started:.0f}s")
        for number, sample in enumerate(samples):
            sid, dates = sample["sample_id"], session_dates(sample)
            known = {t.metadata["dia_id"] for t in eval_locomo.conversation_turns(sample, captions=False)}
            for qa in sample["qa"]:
                gold = {e for e in eval_locomo.evidence_ids(qa.get("evidence") or []) if e in known}
                if not gold or int(qa["category"]) > 4:
                    continue
                rows.append({"set": "locomo", "half": "dev" if number < DEV else "test", "user": sid,
                             "category": int(qa["category"]), "query": qa["question"], "gold": gold,
                             "now": max(dates.values()), **candidates(svc, sid, qa["question"], places[sid])})
            for query in eval_heldout.queries(heldout[sid]) if sid in heldout else []:
                data = heldout[sid]
                session = next(entry[query["set"] if query["set"] != "cue" else "trigger"]["session"]
                               for entry in data["cue_pairs"] + data["indirect_facts"] if entry["id"] == query["id"])
                rows.append({"set": query["set"], "half": "heldout", "user": sid, "category": 0,
                             "query": query["text"], "gold": {query["target"]}, "now": dates[session],
                             **candidates(svc, f"heldout-{sid}", query["text"], places[f"heldout-{sid}"])})
            print(f"{sid}: {len(rows)} queries so far")
    finally:
        svc.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows


# --- reranking --------------------------------------------------------------------------------
def time_signal(row: dict, kind: str, tolerance: float) -> np.ndarray:
    if kind == "time":
        return signals.time_signal(row["query"], row["now"], row["time"], row["text"], tolerance)
    if kind == "temporal":
        return signals.temporal_alignment(row["query"], row["now"], row["time"], tolerance)
    return signals.temporal_mentions(row["query"], row["text"])


def importance_signal(row: dict, edges: str, gamma: float, window: int) -> np.ndarray:
    links = []
    if edges in ("nearby", "both"):
        links += signals.nearby_turn_edges(row["place"], window)
    if edges in ("similar", "both"):
        links += signals.edges_above(row["cosine"], gamma)
    return signals.cooccurrence_importance(row["score"], links)


def rank_of(row: dict, final: np.ndarray) -> int | None:
    order = np.argsort(-final, kind="stable")
    return next((n for n, i in enumerate(order, 1) if row["dia"][i] in row["gold"]), None)


def ranks(rows: list[dict], config: dict) -> list[int | None]:
    out = []
    for row in rows:
        wt, wi = config.get("wt", 0.0), config.get("wi", 0.0)
        final = (1 - wt - wi) * row["score"]
        if wt:
            final = final + wt * time_signal(row, config["time"], config["tolerance"])
        if wi:
            final = final + wi * importance_signal(row, config["edges"], config.get("gamma", 0), config.get("window", 0))
        out.append(rank_of(row, final))
    return out


def recall(found: list[int | None]) -> dict[str, float]:
    return {f"R@{k}": sum(r is not None and r <= k for r in found) / max(len(found), 1) for k in KS}


def key(rows: list[dict], config: dict) -> tuple[float, ...]:
    r = recall(ranks(rows, config))
    return r["R@10"], r["R@5"], r["R@1"]


def configs() -> dict[str, list[dict]]:
    time_grid = [{"time": kind, "tolerance": t, "wt": w}
                 for kind in ("temporal", "when", "time") for t in TOLERANCES for w in WEIGHTS]
    importance = ([{"edges": "nearby", "window": n, "wi": w} for n in WINDOWS for w in WEIGHTS]
                  + [{"edges": "similar", "gamma": g, "wi": w} for g in GAMMAS for w in WEIGHTS]
                  + [{"edges": "both", "window": n, "gamma": g, "wi": w} for n in WINDOWS for g in GAMMAS
                     for w in WEIGHTS])
    return {"time": time_grid, "importance": importance}


def pick(dev: list[dict]) -> dict[str, dict]:
    grid = configs()
    chosen = {"baseline": {}}
    for kind in ("temporal", "when", "time"):
        chosen[f"+{kind}"] = max((c for c in grid["time"] if c["time"] == kind), key=lambda c: key(dev, c))
    chosen["+importance"] = max(grid["importance"], key=lambda c: key(dev, c))
    t, i = chosen["+time"], chosen["+importance"]
    pairs = [{**t, **i, "wt": wt, "wi": wi} for wt, wi in itertools.product((t["wt"], t["wt"] / 2), (i["wi"], i["wi"] / 2))]
    chosen["+both"] = max(pairs, key=lambda c: key(dev, c))
    return chosen


def table(rows: list[dict], chosen: dict[str, dict], groups: list[tuple[str, list[dict]]]) -> dict:
    report: dict[str, dict] = {}
    header = f"{'config':<12}" + "".join(f"{name:>22}" for name, _ in groups)
    print(header + "\n" + f"{'':<12}" + "".join(f"{'R@1   R@5   R@10':>22}" for _ in groups))
    for name, config in chosen.items():
        cells = {}
        for group, members in groups:
            cells[group] = {"n": len(members), **recall(ranks(members, config))}
        report[name] = cells
        print(f"{name:<12}" + "".join(f"{c['R@1']:>10.3f}{c['R@5']:>6.3f}{c['R@10']:>6.3f}" for c in cells.values()))
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.cache and args.cache.exists():
        rows = pickle.loads(args.cache.read_bytes())
    else:
        samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.conversations]
        rows = build(args, samples)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(rows))
    dev = [r for r in rows if r["half"] == "dev"]
    started = time.perf_counter()
    chosen = pick(dev)
    print(f"picked on {len(dev)} dev questions in {time.perf_counter() - started:.0f}s:")
    for name, config in chosen.items():
        print(f"  {name:<12} {config}")
    report = {}
    for half in ("dev", "test"):
        members = [r for r in rows if r["half"] == half]
        groups = [(f"{c} {eval_locomo.CATEGORIES[c]}", [r for r in members if r["category"] == c]) for c in (1, 2, 3, 4)]
        print(f"\nLoCoMo {half} ({len({r['user'] for r in members})} conversations), categories 1-4 and pooled")
        report[half] = table(members, chosen, [*groups, ("1-4", members)])
    held = [r for r in rows if r["half"] == "heldout"]
    if held:
        print(f"\nheld-out associative set ({len({r['user'] for r in held})} conversations), never tuned on")
        report["heldout"] = table(held, chosen, [(s, [r for r in held if r["set"] == s]) for s in eval_heldout.SETS])
    timing = [r for r in rows if r["set"] == "locomo"][:200]
    for name in ("+time", "+importance"):
        started = time.perf_counter()
        ranks(timing, chosen[name])
        print(f"{name}: {1000 * (time.perf_counter() - started) / max(len(timing), 1):.2f} ms per query (50 candidates)")
    if args.json:
        args.json.write_text(json.dumps({"chosen": chosen, "report": report}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
