"""How much a weak lexical match should count: the hybrid score's lexical half, swept offline.

What it measures
    The haystack of scripts/eval_heldout.py (the ten LoCoMo conversations with the held-out cue
    and fact turns inserted, one user each, imported through the real service). Every query's
    candidates are collected once per query encoder (frozen E, and the shipped adapter as the
    read path serves it) exactly as dcpm.read.search collects them (dense and BM25 top
    `candidate_pool`, sparse-only candidates scored in the index); every calibration is then
    applied offline with dcpm.read.fusion's own functions, so a sweep costs no encoding.

    Query sets (the rank of the first target among the fused candidates):
      cue, indirect, direct   scripts/heldout (writer-disjoint; no word shared with the target
                              for cue and indirect)
      locomo                  LoCoMo categories 1-4, any evidence turn (no time signal here: it
                              reorders only queries that name a time, scripts/eval_signals.py)
      paraphrase, unrelated   scripts/scores/questions.json: a paraphrase must rank its turn first
                              and score above the threshold; an unrelated question must find no
                              turn above it (t95 = the score that 95% of them stay under)

    Swept: the lexical part's power p (1 = s / (s + k), the old default) and half point k, the
    cosine gate on it (shared words count as far as the memory is about the same thing), and
    the dense weight alpha. Then a two-fold check by conversation: the setting chosen on half the
    conversations (most cue + indirect R@10 with the adapter, LoCoMo R@10 no worse than the old
    default's frozen number there) is scored on the other half.

Run
    . .venv/bin/activate
    python scripts/eval_lexical.py --cache /tmp/lexical.pkl     # ~4 minutes on 2 cores, then seconds
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
from dataclasses import replace
from pathlib import Path

import eval_heldout as heldout
import numpy as np
from eval_locomo import evidence_ids, normalize_id

QUESTIONS = Path(__file__).resolve().parent / "scores" / "questions.json"
RANKED = ("cue", "indirect", "direct", "locomo")
OLD_THRESHOLD = 0.37  # the threshold that went with the old calibration (p = 1, k = 30 BM25)
ENCODERS = ("frozen", "adapter")
# k in units of a rare word's IDF (dcpm.read.lexical_scale): 2.4 is 20 BM25 points in this index
# gate: the cosine at which shared words count half (None: always whole; dcpm.read.fusion)
GRID = [(alpha, power, k, gate) for alpha in (0.4, 0.5) for power in (1, 2, 2.5, 3, 4)
        for k in (1.5, 2.0, 2.4, 3.0, 3.6) for gate in (None, 0.1, 0.15, 0.2)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--cache", type=Path, default=None, help="pickle of the collected candidates (read or written)")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the sweep as JSON")
    return p.parse_args(argv)


def asked_of(sample: dict, held: dict, questions: dict, names: set[str]) -> list[tuple[str, str, set[str]]]:
    """(set, query, target turn names) of one conversation."""
    user = sample["sample_id"]
    asked = [(q["set"], q["text"], {q["target"]}) for q in heldout.queries(held)]
    for qa in sample["qa"]:
        gold = {e for e in evidence_ids(qa.get("evidence") or []) if e in names}
        if gold and qa.get("category") in (1, 2, 3, 4):
            asked.append(("locomo", qa["question"], gold))
    asked += [("paraphrase", p["question"], {p["target"]}) for p in questions["paraphrase"] if p["user"] == user]
    return asked + [("unrelated", text, set()) for text in questions["unrelated"]]


def collect(threads: int) -> dict:
    """{"points": N of the index, "rows": one per query: set, user, and per encoder (target mask,
    cosines, BM25s) of its candidates}."""
    import torch
    from sqlalchemy import select

    from dcpm.index import Scope
    from dcpm.read.search import candidates
    from dcpm.service import MemoryService
    from dcpm.store.models import RawInput

    torch.set_num_threads(threads)
    sets = heldout.load_heldout(heldout.HELDOUT, None)
    samples = [s for s in json.loads(heldout.DEFAULT_DATA.read_text(encoding="utf-8")) if s["sample_id"] in sets]
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    svc = MemoryService(heldout.mode_settings("replace", Path(tempfile.mkdtemp(prefix="dcpm-lexical-"))))
    try:
        heldout.import_conversations(svc, samples, sets)
        svc.index.optimize()
        with svc.db.session() as session:  # the index answers with store ids; turn names ride in the metadata
            name = {i: normalize_id((meta or {}).get("dia_id", "")) or (meta or {}).get("dia_id")
                    for i, meta in session.execute(select(RawInput.id, RawInput.meta))}
        encoders = {"frozen": svc.frozen_encoder, "adapter": svc.query_encoder}
        rows = []
        for sample in samples:
            user = sample["sample_id"]
            names = {name[i] for i in name}
            for set_name, text, targets in asked_of(sample, sets[user], questions, names):
                row = {"set": set_name, "user": user}
                for label, encoder in encoders.items():
                    dense, sparse = candidates(svc.index, encoder.encode_query(text), Scope(user, kinds=("raw",)),
                                               svc.settings.candidate_pool)
                    ids = list(dense)
                    row[label] = (np.array([name.get(i) in targets for i in ids]),
                                  np.array([dense[i] for i in ids]), np.array([sparse.get(i, 0.0) for i in ids]))
                rows.append(row)
            print(f"{user}: {len(rows)} queries", flush=True)
        return {"points": svc.index.count(), "rows": rows, "idf_per_user": svc.index.idf_per_user,
                "user_points": {s["sample_id"]: svc.index.count(s["sample_id"]) for s in samples}}
    finally:
        svc.close()


def scores(cosines: np.ndarray, bm25: np.ndarray, calibration) -> np.ndarray:
    """dcpm.read.fusion's score over arrays (checked against it by same_as_fusion)."""
    dense = 1.0 / (1.0 + np.exp(-(cosines - calibration.dense_center) / calibration.dense_width))
    odds = (np.maximum(bm25, 0.0) / calibration.lexical_k) ** calibration.lexical_power
    gate = 1.0
    if calibration.lexical_gate is not None:
        gate = 1.0 / (1.0 + np.exp(-(cosines - calibration.lexical_gate) / calibration.lexical_gate_width))
    return calibration.alpha * dense + (1 - calibration.alpha) * gate * odds / (1.0 + odds)


def same_as_fusion(rows: list[dict], calibration) -> None:
    from dcpm.read.fusion import score_of

    _, cosines, bm25 = rows[0]["frozen"]
    expected = [score_of("", c, b, calibration).score for c, b in zip(cosines, bm25)]
    if not np.allclose(scores(cosines, bm25, calibration), expected):
        raise SystemExit("the offline score does not match dcpm.read.fusion")


def measure(rows: list[dict], encoder: str, calibration, threshold: float) -> dict[str, float]:
    """R@1 and R@10 per ranked set, paraphrases first and above `threshold`, unrelated t95 and above."""
    ranks: dict[str, list[int]] = {name: [] for name in (*RANKED, "paraphrase")}
    paraphrase_above, unrelated_top = [], []
    for row in rows:
        targets, cosines, bm25 = row[encoder]
        scored = scores(cosines, bm25, calibration)
        if row["set"] == "unrelated":
            unrelated_top.append(float(scored.max()) if len(scored) else 0.0)
            continue
        order = np.argsort(-scored, kind="stable")
        found = np.flatnonzero(targets[order])
        rank = int(found[0]) + 1 if len(found) else 10_000
        ranks[row["set"]].append(rank)
        if row["set"] == "paraphrase":
            paraphrase_above.append(rank == 1 and scored[order[0]] >= threshold)
    out = {f"{name} R@{k}": float(np.mean([r <= k for r in ranks[name]])) for name in RANKED for k in (1, 10)}
    out["paraphrase first+above"] = float(np.mean(paraphrase_above))
    out["unrelated t95"] = float(np.quantile(unrelated_top, 0.95))
    out["unrelated above"] = float(np.mean([s >= threshold for s in unrelated_top]))
    return out


def line(label: str, m: dict[str, float]) -> str:
    return (f"| {label} | " + " | ".join(f"{m[f'{s} R@10']:.3f}" for s in RANKED[:3])
            + f" | {m['locomo R@1']:.3f} / {m['locomo R@10']:.3f} | {m['paraphrase first+above']:.3f}"
            + f" | {m['unrelated t95']:.3f} | {m['unrelated above']:.3f} |")


def two_fold(rows: list[dict], base, current, threshold: float, scale: float) -> list[str]:
    """Choose on half the conversations, score on the other half (beside the defaults, old and now)."""
    users = sorted({r["user"] for r in rows})
    out = []
    for train_users, test_users in ((users[0::2], users[1::2]), (users[1::2], users[0::2])):
        train = [r for r in rows if r["user"] in train_users]
        test = [r for r in rows if r["user"] in test_users]
        floor = measure(train, "frozen", base, threshold)["locomo R@10"] - 0.005
        best = None
        for alpha, power, k, gate in GRID:
            variant = replace(base, alpha=alpha, lexical_power=power, lexical_k=k * scale, lexical_gate=gate)
            m = measure(train, "adapter", variant, threshold)
            gain = m["cue R@10"] + m["indirect R@10"]
            if m["locomo R@10"] >= floor and (best is None or gain > best[0]):
                best = (gain, variant)
        chosen = best[1]
        out.append(line(f"chosen on {','.join(u[5:] for u in train_users)}: alpha {chosen.alpha}, "
                        f"p {chosen.lexical_power}, k {chosen.lexical_k / scale:.1f}, gate {chosen.lexical_gate}; "
                        "adapter on the rest", measure(test, "adapter", chosen, threshold)))
        out.append(line("  the default now on the rest, adapter", measure(test, "adapter", current, threshold)))
        out.append(line(f"  old default on the rest, adapter (threshold {OLD_THRESHOLD})",
                        measure(test, "adapter", base, OLD_THRESHOLD)))
        out.append(line(f"  old default on the rest, frozen (threshold {OLD_THRESHOLD})",
                        measure(test, "frozen", base, OLD_THRESHOLD)))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cache and args.cache.exists():
        collected = pickle.loads(args.cache.read_bytes())
    else:
        collected = collect(args.threads)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(collected))

    from dcpm.config import Settings
    from dcpm.read.lexical_scale import rare_word_idf
    from dcpm.read.search import calibration

    rows, scale = collected["rows"], rare_word_idf(collected["points"])
    if collected.get("idf_per_user"):  # each user's BM25 counts their own N: k in each user's rare-word IDFs
        for row in rows:
            unit = rare_word_idf(collected["user_points"][row["user"]])
            row.update({label: (row[label][0], row[label][1], row[label][2] / unit) for label in ENCODERS})
        scale = 1.0
    settings = Settings()
    current, threshold = calibration(settings, scale), settings.search_threshold
    # the default before issue 15 (k in BM25)
    old = replace(current, alpha=0.5, lexical_k=30.0, lexical_power=1.0, lexical_gate=None)
    header = ("| setting | cue R@10 | indirect R@10 | direct R@10 | LoCoMo R@1 / R@10 | paraphrase first and "
              f"above {threshold} | unrelated t95 | unrelated above {threshold} |\n|" + " --- |" * 8)
    same_as_fusion(rows, replace(current, lexical_power=3.0, lexical_k=20.0))
    report = []
    print(f"{len(rows)} queries, {collected['points']} points (a rare word's IDF {scale:.2f}); threshold "
          f"{threshold}; k in rare-word IDFs (x {scale:.2f} = BM25)\n\n{header}")
    for alpha, power, k, gate in [(old.alpha, 1, old.lexical_k / scale, None), *GRID]:
        variant = replace(current, alpha=alpha, lexical_power=power, lexical_k=k * scale, lexical_gate=gate)
        for encoder in ENCODERS:
            m = measure(rows, encoder, variant, OLD_THRESHOLD if variant == old else threshold)
            report.append({"alpha": alpha, "power": power, "k": k, "gate": gate, "encoder": encoder, **m})
            note = f" (old default, threshold {OLD_THRESHOLD})" if variant == old else ""
            print(line(f"alpha {alpha} p {power} k {k:.2f} gate {gate}, {encoder}{note}", m), flush=True)
    print(f"\nthe settings now (alpha {current.alpha}, p {current.lexical_power}, k {settings.score_lexical_k}, "
          f"gate {current.lexical_gate}):"
          f"\n\n{header}")
    for encoder in ENCODERS:
        print(line(encoder, measure(rows, encoder, current, threshold)))
    print(f"\ntwo folds by conversation:\n\n{header}")
    print("\n".join(two_fold(rows, old, current, threshold, scale)))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
