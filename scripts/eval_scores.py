"""Scores that mean something: the measurement behind Settings.score_dense_center, score_dense_width,
score_lexical_k, hybrid_alpha and search_threshold.

What it measures
    The ten LoCoMo conversations are imported verbatim, each as one user with 369-689 memories
    (the same import as scripts/eval_locomo.py; a --data-dir it already filled is reused). For each
    question the read path's candidates are collected once per query encoder (the frozen embedder
    and the shipped associative adapter): the dense top `candidate_pool` with their cosines and the
    BM25 top `candidate_pool` with their BM25 scores. Every calibration is then applied offline
    exactly as dcpm.read.fusion applies it, so a sweep costs no further encoding.

    Three question sets:
    - paraphrase: 40 questions in our own words (scripts/scores/questions.json), each about one
      specific turn of one conversation; success = that turn ranks first and scores above the threshold;
    - unrelated: 40 questions about nothing the conversations mention, asked of every conversation
      (400 searches); a failure = any memory scores above the threshold;
    - LoCoMo's own questions (categories 1-4): evidence Recall@1/5/10, to keep the ranking honest.

    The dense calibration is a logistic regression (balanced classes) of "is this the memory the
    question is about" on the cosine: positives are the paraphrase targets, negatives the best
    cosine each unrelated question finds in each conversation, under the frozen encoder.

Run
    python scripts/eval_scores.py --data-dir /tmp/locomo          # reuses eval_locomo's store
    python scripts/eval_scores.py --cache /tmp/cands.pkl           # keep the candidates for re-runs
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_locomo import DEFAULT_DATA, evidence_ids, import_conversations

QUESTIONS = Path(__file__).resolve().parent / "scores" / "questions.json"
ENCODERS = ("frozen", "associative")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    p.add_argument("--data-dir", type=Path, default=None, help="dcpm data directory (default: a temporary one)")
    p.add_argument("--cache", type=Path, default=None, help="pickle of the collected candidates (read or written)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--json", type=Path, default=None, help="write the distributions and tables as JSON")
    return p.parse_args(argv)


# --- collection ------------------------------------------------------------------------------
def collect(args: argparse.Namespace, samples: list[dict], questions: dict) -> dict[str, Any]:
    """{encoder: {"paraphrase"|"unrelated"|"locomo": [(user, gold dia ids, dense, sparse, dia of id)]}}."""
    from dcpm.config import Settings
    from dcpm.index import Scope
    from dcpm.read.search import candidates
    from dcpm.service import MemoryService

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="dcpm-scores-"))
    svc = MemoryService(Settings(data_dir=data_dir, query_adapter="default"))
    try:
        import_conversations(svc, samples)
        svc.index.optimize()
        encoders = {"frozen": svc.frozen_encoder, "associative": svc.query_encoder}
        if encoders["associative"] is encoders["frozen"]:
            raise SystemExit("the shipped associative adapter did not load")
        asked = [("paraphrase", p["user"], p["question"], {p["target"]}) for p in questions["paraphrase"]]
        asked += [("unrelated", s["sample_id"], q, set()) for s in samples for q in questions["unrelated"]]
        known = {user: set(ids.values()) for user, ids in dia_ids(svc.db).items()}
        for sample in samples:
            for qa in sample["qa"]:
                gold = {e for e in evidence_ids(qa.get("evidence") or []) if e in known[sample["sample_id"]]}
                if gold and 1 <= int(qa["category"]) <= 4:
                    asked.append(("locomo", sample["sample_id"], qa["question"], gold))
        pool = svc.settings.candidate_pool
        out: dict[str, Any] = {}
        for name, encoder in encoders.items():
            rows: dict[str, list] = {"paraphrase": [], "unrelated": [], "locomo": []}
            for n, (kind, user, text, gold) in enumerate(asked):
                dense, sparse = candidates(svc.index, encoder.encode_query(text), Scope(user_id=user, kinds=("raw",)),
                                           pool)
                rows[kind].append((user, gold, dense, sparse))
                if n % 500 == 0:
                    print(f"{name}: {n}/{len(asked)} questions", flush=True)
            out[name] = rows
        out["dia"] = dia_ids(svc.db)
        out["idf_per_user"] = svc.index.idf_per_user
        return out
    finally:
        svc.close()


def in_rare_word_units(collected: dict[str, Any]) -> None:
    """Every BM25 score divided by its user's rare-word IDF, as dcpm.read.lexical_scale scales k
    per user: one calibration then applies to every user's rows."""
    from dcpm.read.lexical_scale import rare_word_idf

    unit = {user: rare_word_idf(len(ids)) for user, ids in collected["dia"].items()}
    for encoder in ENCODERS:
        for rows in collected[encoder].values():
            rows[:] = [(user, gold, dense, {i: s / unit[user] for i, s in sparse.items()})
                       for user, gold, dense, sparse in rows]


def dia_ids(db) -> dict[str, dict[str, str]]:
    """{user: {memory id: LoCoMo dia_id}}: the ids the index answers with are the store's (an
    import scopes the ids it was given to their user), the dia_id rides in the metadata."""
    from sqlalchemy import select

    from dcpm.store.models import RawInput

    out: dict[str, dict[str, str]] = {}
    with db.session() as session:
        for raw_id, user_id, meta in session.execute(select(RawInput.id, RawInput.user_id, RawInput.meta)):
            out.setdefault(user_id, {})[raw_id] = (meta or {}).get("dia_id")
    return out


# --- scoring, exactly as dcpm.read.fusion ------------------------------------------------------
def ranked(row: tuple, calibration) -> list:
    from dcpm.read.fusion import fuse

    _, _, dense, sparse = row
    return fuse(dense, sparse if calibration.alpha < 1 else {}, calibration)


def fit_dense(collected: dict[str, Any]) -> tuple[float, float, dict[str, list[float]]]:
    """Logistic regression of relevance on the cosine: (center, width) and the two samples."""
    from sklearn.linear_model import LogisticRegression

    rows = collected["frozen"]
    dia = collected["dia"]
    positives = [next(c for i, c in row[2].items() if dia[row[0]].get(i) in row[1])
                 for row in rows["paraphrase"] if any(dia[row[0]].get(i) in row[1] for i in row[2])]
    negatives = [max(row[2].values()) for row in rows["unrelated"]]
    x = np.array(positives + negatives).reshape(-1, 1)
    y = np.array([1] * len(positives) + [0] * len(negatives))
    model = LogisticRegression(class_weight="balanced", C=100.0).fit(x, y)
    slope, intercept = float(model.coef_[0][0]), float(model.intercept_[0])
    return -intercept / slope, 1.0 / slope, {"paraphrase_target_cosine": positives, "unrelated_top_cosine": negatives}


def outcomes(collected: dict[str, Any], encoder: str, calibration) -> dict[str, Any]:
    """Per question: the paraphrase target's rank and score, the unrelated best score, LoCoMo ranks."""
    dia = collected["dia"]
    rows = collected[encoder]

    def first_gold(row: tuple) -> tuple[int | None, float | None]:
        for rank, fused in enumerate(ranked(row, calibration), 1):
            if dia[row[0]].get(fused.id) in row[1]:
                return rank, fused.score
        return None, None

    paraphrase = [first_gold(row) for row in rows["paraphrase"]]
    unrelated = [ranked(row, calibration)[0].score for row in rows["unrelated"]]
    locomo = [first_gold(row)[0] for row in rows["locomo"]]
    return {"paraphrase": paraphrase, "unrelated_top": unrelated, "locomo_ranks": locomo}


def recall(ranks: list[int | None], k: int) -> float:
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def threshold_table(result: dict[str, Any], thresholds: list[float]) -> list[dict[str, float]]:
    rows = []
    for t in thresholds:
        found = sum(1 for rank, score in result["paraphrase"] if rank == 1 and score is not None and score >= t)
        above = sum(1 for score in result["unrelated_top"] if score >= t)
        rows.append({"threshold": t, "paraphrase_first_and_above": found / len(result["paraphrase"]),
                     "unrelated_with_a_hit_above": above / len(result["unrelated_top"])})
    return rows


def percentiles(values: list[float]) -> str:
    qs = np.percentile(values, [0, 5, 25, 50, 75, 95, 100])
    return " ".join(f"{q:.3f}" for q in qs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    if args.cache and args.cache.exists():
        collected = pickle.loads(args.cache.read_bytes())
    else:
        collected = collect(args, samples, questions)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(collected))

    from dcpm.config import Settings
    from dcpm.read.lexical_scale import rare_word_idf
    from dcpm.read.search import calibration

    center, width, fitted_on = fit_dense(collected)
    print(f"dense calibration fitted on {len(fitted_on['paraphrase_target_cosine'])} paraphrase targets and "
          f"{len(fitted_on['unrelated_top_cosine'])} unrelated best matches: center {center:.3f}, width {width:.3f}")
    for name, values in fitted_on.items():
        print(f"  {name:<26} min/p5/p25/p50/p75/p95/max {percentiles(values)}")
    settings = Settings()
    if collected.get("idf_per_user"):  # each user's BM25 counts their own N (dcpm.index.user_idf)
        in_rare_word_units(collected)
        scale = 1.0
    else:  # an index counting every turn (before IDF per user)
        scale = rare_word_idf(sum(len(ids) for ids in collected["dia"].values()))
    base = calibration(settings, scale)
    report: dict[str, Any] = {"fitted": {"center": center, "width": width, **fitted_on}, "settings": {}}
    print(f"\nsettings: alpha {base.alpha}, center {base.dense_center}, width {base.dense_width}, "
          f"k {settings.score_lexical_k} rare-word IDFs = {base.lexical_k:.1f} BM25 here, power {base.lexical_power}, "
          f"threshold {settings.search_threshold}")
    thresholds = [round(0.3 + 0.025 * n, 3) for n in range(17)]
    for encoder in ENCODERS:
        result = outcomes(collected, encoder, base)
        ranks = [rank for rank, _ in result["paraphrase"]]
        print(f"\n[{encoder}] LoCoMo cats 1-4 R@1 {recall(result['locomo_ranks'], 1):.3f} "
              f"R@5 {recall(result['locomo_ranks'], 5):.3f} R@10 {recall(result['locomo_ranks'], 10):.3f}; "
              f"paraphrase target first {recall(ranks, 1):.3f}, in top 5 {recall(ranks, 5):.3f}")
        target_scores = [s for _, s in result["paraphrase"] if s is not None]
        print(f"  paraphrase target score  min/p5/p25/p50/p75/p95/max {percentiles(target_scores)}")
        print(f"  unrelated best score     min/p5/p25/p50/p75/p95/max {percentiles(result['unrelated_top'])}")
        table = threshold_table(result, thresholds)
        for row in table:
            print(f"  threshold {row['threshold']:.3f}: paraphrase first and above "
                  f"{row['paraphrase_first_and_above']:.3f}, unrelated with a hit above "
                  f"{row['unrelated_with_a_hit_above']:.3f}")
        report["settings"][encoder] = {"result": result, "thresholds": table}
    print(f"\nsweep (frozen, center {center:.2f} as fitted): alpha, width, k -> LoCoMo R@1/5/10; the threshold "
          "leaving 5% of unrelated questions a hit, and the paraphrases first and above it")
    sweep = []
    for alpha in (0.5, 0.6, 0.7):
        for width in (0.1, 0.2, 0.25):
            for k in (1.5, 2.4, 3.6):  # rare-word IDFs (dcpm.read.lexical_scale)
                variant = replace(base, alpha=alpha, dense_width=width, lexical_k=k * scale,
                                  dense_center=round(center, 2))
                result = outcomes(collected, "frozen", variant)
                t95 = float(np.quantile(result["unrelated_top"], 0.95))
                found = threshold_table(result, [t95])[0]["paraphrase_first_and_above"]
                row = {"alpha": alpha, "width": width, "k": k, "t95": t95, "paraphrase_first_and_above": found,
                       **{f"R@{n}": recall(result["locomo_ranks"], n) for n in (1, 5, 10)}}
                sweep.append(row)
                print(f"  alpha {alpha:.2f} width {width:.2f} k {k:>4.1f}: R@1 {row['R@1']:.3f} R@5 {row['R@5']:.3f} "
                      f"R@10 {row['R@10']:.3f}  t95 {t95:.3f}, paraphrase first and above {found:.3f}")
    report["sweep"] = sweep
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
