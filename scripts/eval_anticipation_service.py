"""Do anticipations (T-Mem) as built reproduce scripts/eval_anticipation.py's offline gain? The
same measurement through the product's write and read paths.

What it measures
    One `MemoryService` (default Settings, a temporary data directory) whose LLM is a scripted
    local server (dcpm.testing.scripted_llm), one user per LoCoMo conversation. LoCoMo's own turns
    are imported raw, as scripts/eval_heldout.py imports them. Every inserted held-out turn (its
    cue and fact turns; with --distractors also all nine other conversations' ones, whatever
    --conversations selects, placed as eval_heldout places them) goes through `svc.add_memory`,
    stamped with its session's date and metadata {"dia_id", "inserted": True}; the scripted
    extraction answers, for that turn, the items of its record in scripts/heldout/anticipations.jsonl,
    with the record's anticipations on the first item, and every item is added. So the store
    holds each inserted turn, its items and their anticipation vector as the writer stores them.
    Each trigger and question is then asked with `svc.search` (limit 10, threshold 0, default
    kinds: raw turns and items grouped into one hit per memory) and the target turn's rank is
    read from hit.metadata["dia_id"], four ways over the same store: frozen encoder
    (associative=False) or the shipped adapter (default), each with Settings.anticipations off
    and on (it only switches the read lane). "(inserted only)" rows filter on the metadata
    dia_id being one of the added turns' (their items carry it too), ranking the target among
    inserted turns and their items only, where every candidate has anticipations. LoCoMo
    questions of categories 1-4 give evidence Recall@10 on the same store (as
    scripts/eval_locomo.py computes it) and how many inserted turns intrude into their top 10.
    The paired change lists, per set, the queries whose target entered / left the top 10 when
    anticipations are turned on.

Run
    . .venv/bin/activate
    python scripts/eval_anticipation_service.py --conversations conv-26,conv-30   # about 1 minute
    python scripts/eval_anticipation_service.py                       # all ten, about 4 minutes on 2 cores
    python scripts/eval_anticipation_service.py --distractors --json out.json     # about 6 minutes
    python scripts/eval_anticipation_service.py --distractors --set hybrid_alpha=1.0 --set temporal_weight=0
                                          # dense cosine only, as scripts/eval_anticipation.py ranks

Results: scripts/heldout/README.md, "Anticipations as built, through the service".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import eval_heldout as heldout
from eval_anticipation import ANTICIPATIONS, load
from eval_locomo import evidence_ids, normalize_id

K = 10
COLUMNS = [(encoder, on) for encoder in ("frozen", "adapter") for on in (False, True)]
INSERTED_ONLY = " (inserted only)"
LOCOMO = "locomo 1-4 R@10"
INTRUSION = "inserted turns in a LoCoMo top 10"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--conversations", default=None, help="comma-separated sample ids (default: all)")
    p.add_argument("--data", type=Path, default=heldout.DEFAULT_DATA, help="locomo10.json")
    p.add_argument("--distractors", action="store_true",
                   help="also add the nine other conversations' inserted turns, as same-writer distractors")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a Settings field, e.g. --set hybrid_alpha=1.0 (dense only; repeatable)")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the rows, changes and ranks")
    return p.parse_args(argv)


def scripted_extraction(records: dict[str, dict], sets: dict[str, dict], missed: list[str]) -> Callable:
    """The extraction model's answer for a turn: its record's items as facts, the anticipations
    on the first (a distractor says its original's text, so it gets its original's record). A
    turn without a record yields nothing and is noted in `missed`."""
    by_text = {insertion["text"]: records[turn_id] for data in sets.values()
               for turn_id, insertion in heldout.inserted_turns(data)}

    def extract(turns: list[str]) -> dict:
        items = []
        for line in turns:
            record = by_text.get(line.split(": ", 1)[-1])
            if record is None:
                missed.append(line)
                continue
            items += [{"kind": "fact", "text": text, "topic": "other", "salience": 0.8,
                       "anticipations": record["anticipations"] if n == 0 else []}
                      for n, text in enumerate(record["items"])]
        return {"items": items, "summary": None}

    return extract


def write(svc, sample: dict, sets: dict[str, dict], samples: dict[str, dict], distractors: bool) -> tuple[int, list]:
    """LoCoMo's turns imported raw, then each inserted turn added (extracted) in time order;
    returns (turns imported, the added turns' ids)."""
    from dcpm.api.models import AddMemoryRequest
    from dcpm.write.raw import deterministic_raw_id

    sample_id = sample["sample_id"]
    others = [(samples[other], sets[other]) for other in sets if other != sample_id and distractors]
    turns = heldout.conversation_turns(sample, sets[sample_id], heldout.distractor_turns(sample, others))
    inserted_ids = {turn_id for turn_id, _ in heldout.inserted_turns(sets[sample_id])}
    added = [t for t in turns if t.id in inserted_ids or "/" in str(t.id)]
    raw = [t for t in turns if not (t.id in inserted_ids or "/" in str(t.id))]
    for turn in raw:
        turn.id = deterministic_raw_id(sample_id, turn, 0)
    batch = min(svc.settings.import_batch_size, svc.settings.max_messages)
    for start in range(0, len(raw), batch):
        svc.import_turns(sample_id, raw[start:start + batch])
    for turn in added:
        response = svc.add_memory(AddMemoryRequest(
            user_id=sample_id, session_id=turn.session_id, timestamp=turn.timestamp,
            messages=[{"content": turn.text, "name": turn.speaker, "timestamp": turn.timestamp}],
            metadata={"dia_id": turn.id, "inserted": True}))
        if response.status != "done" or not any(o.op == "ADD" for o in response.operations):
            raise SystemExit(f"{sample_id} {turn.id}: no item added ({response.status}: {response.error})")
    return len(raw), [t.id for t in added]


def top(svc, user_id: str, text: str, associative: bool, filters: dict | None = None) -> list[dict]:
    from dcpm.api.models import SearchRequest

    result = svc.search(SearchRequest(user_id=user_id, query=text, limit=K, threshold=0, associative=associative,
                                      filters=filters))
    return [hit.metadata for hit in result.hits]


def locomo_questions(sample: dict) -> list[dict]:
    """Categories 1-4 with evidence among the conversation's turns (normalized ids)."""
    known = {normalize_id(t["dia_id"]) or t["dia_id"] for key, turns in sample["conversation"].items()
             if key.startswith("session_") and key[8:].isdigit() for t in turns}
    asked = [{"question": qa["question"], "category": qa["category"],
              "evidence": sorted(set(evidence_ids(qa.get("evidence") or [])) & known)}
             for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4)]
    return [q for q in asked if q["evidence"]]


def measure(svc, sample: dict, heldout_set: dict, added: list[str]) -> dict[tuple[str, bool], list[dict]]:
    """Every query, on the same store, for each column: held-out rows (set, rank) and LoCoMo rows
    (category, hit, intruders). "Inserted only" filters on the added turns' dia_ids, which their
    items carry too: a filter on the boolean `inserted` matches nothing on the edge index (qdrant-edge
    reads MatchValue(True) as the integer 1)."""
    user_id = sample["sample_id"]
    scopes = {"": None, INSERTED_ONLY: {"dia_id": added}}
    out: dict[tuple[str, bool], list[dict]] = defaultdict(list)
    for encoder, on in COLUMNS:
        svc.settings.anticipations = on
        associative = encoder == "adapter"
        for query in heldout.queries(heldout_set):
            for suffix, filters in scopes.items():
                found = [m.get("dia_id") for m in top(svc, user_id, query["text"], associative, filters)]
                rank = found.index(query["target"]) + 1 if query["target"] in found else None
                out[(encoder, on)].append({"user": user_id, **query, "set": query["set"] + suffix, "rank": rank})
        for question in locomo_questions(sample):
            hits = top(svc, user_id, question["question"], associative)
            found = {normalize_id(str(m.get("dia_id"))) for m in hits}
            intruders = {m.get("dia_id") for m in hits if m.get("inserted")}
            out[(encoder, on)].append({"user": user_id, "set": LOCOMO, "category": question["category"],
                                       "rank": 1 if found & set(question["evidence"]) else None,
                                       "intruders": len(intruders)})
    svc.settings.anticipations = True
    return out


def table(ranks: dict[tuple[str, bool], list[dict]]) -> tuple[dict, dict]:
    """Rows {name: {column: value}} and the paired change {name: {encoder: [entered, left]}}."""
    names = [s + suffix for suffix in ("", INSERTED_ONLY) for s in heldout.SETS] + [LOCOMO]
    rows: dict[str, dict] = {}
    for name in names:
        rows[name] = {"n": sum(r["set"] == name for r in ranks[COLUMNS[0]])}
        for column in COLUMNS:
            hits = [r["rank"] is not None for r in ranks[column] if r["set"] == name]
            rows[name][label(column)] = sum(hits) / len(hits) if hits else float("nan")
    rows[INTRUSION] = {"n": rows[LOCOMO]["n"]}
    for column in COLUMNS:
        counts = [r["intruders"] for r in ranks[column] if r["set"] == LOCOMO]
        rows[INTRUSION][label(column)] = sum(counts) / len(counts) if counts else float("nan")
    change: dict[str, dict] = {name: {} for name in names}
    for encoder in ("frozen", "adapter"):
        for before, after in zip(ranks[(encoder, False)], ranks[(encoder, True)]):
            entered, left = change[after["set"]].setdefault(encoder, [0, 0])
            hit_before, hit_after = before["rank"] is not None, after["rank"] is not None
            change[after["set"]][encoder] = [entered + (hit_after and not hit_before),
                                             left + (hit_before and not hit_after)]
    return rows, change


def label(column: tuple[str, bool]) -> str:
    return f"{column[0]} {'on' if column[1] else 'off'}"


def print_markdown(rows: dict, change: dict) -> None:
    print("\nRecall@10 through svc.search (anticipations off / on: Settings.anticipations, same store)\n")
    print("| set | n | " + " | ".join(map(label, COLUMNS)) + " |")
    print("| --- | --- |" + " --- |" * len(COLUMNS))
    for name, row in rows.items():
        digits = 2 if name == INTRUSION else 3
        print(f"| {name} | {row['n']} | " + " | ".join(f"{row[label(c)]:.{digits}f}" for c in COLUMNS) + " |")
    print("\nPaired change, anticipations off -> on: queries whose target entered / left the top 10\n")
    print("| set | frozen | adapter |\n| --- | --- | --- |")
    for name, by_encoder in change.items():
        print(f"| {name} | " + " | ".join(f"+{by_encoder.get(e, [0, 0])[0]} / -{by_encoder.get(e, [0, 0])[1]}"
                                          for e in ("frozen", "adapter")) + " |")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sets = heldout.load_heldout(heldout.HELDOUT, None)  # all ten: the distractors come from every other one
    samples = {s["sample_id"]: s for s in json.loads(args.data.read_text(encoding="utf-8")) if s["sample_id"] in sets}
    chosen = args.conversations.split(",") if args.conversations else sorted(sets)
    if any("=" not in pair for pair in args.overrides):
        raise SystemExit(f"--set expects KEY=VALUE, got {args.overrides}")
    overrides = dict(pair.split("=", 1) for pair in args.overrides)
    unknown = [c for c in chosen if c not in samples]
    if unknown:
        raise SystemExit(f"unknown conversation(s) {unknown}; known: {sorted(samples)}")

    import torch

    from dcpm.config import Settings
    from dcpm.service import MemoryService
    from dcpm.testing.scripted_llm import LLMServer

    torch.set_num_threads(args.threads)
    missed: list[str] = []
    ranks: dict[tuple[str, bool], list[dict]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    counts = [0, 0]
    data_dir = Path(tempfile.mkdtemp(prefix="dcpm-anticipation-service-"))
    started = time.perf_counter()
    try:
        with LLMServer() as llm:
            llm.script.extract = scripted_extraction(load(ANTICIPATIONS), sets, missed)
            svc = MemoryService(Settings(data_dir=data_dir, llm_base_url=llm.url, llm_model="scripted", **overrides))
            try:
                for sample_id in chosen:
                    t0 = time.perf_counter()
                    imported, added = write(svc, samples[sample_id], sets, samples, args.distractors)
                    svc.index.optimize()
                    t1 = time.perf_counter()
                    for column, rows in measure(svc, samples[sample_id], sets[sample_id], added).items():
                        ranks[column] += rows
                    seconds["write"] += t1 - t0
                    seconds["search"] += time.perf_counter() - t1
                    counts = [counts[0] + imported, counts[1] + len(added)]
                    print(f"{sample_id}: {imported} turns imported, {len(added)} added; write {t1 - t0:.0f}s, "
                          f"search {time.perf_counter() - t1:.0f}s", flush=True)
            finally:
                svc.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    seconds["total"] = time.perf_counter() - started
    if missed:
        raise SystemExit(f"{len(missed)} added turn(s) had no record: {missed[:3]}")
    rows, change = table(ranks)
    print(f"\n{len(chosen)} conversation(s), distractors {'on' if args.distractors else 'off'}, settings "
          f"{overrides or 'default'}: {counts[0]} turns "
          f"imported, {counts[1]} added through the writer; " + ", ".join(f"{k} {v:.0f}s" for k, v in seconds.items()))
    print_markdown(rows, change)
    if args.json:
        args.json.write_text(json.dumps({"conversations": chosen, "distractors": args.distractors,
                                         "settings": overrides, "rows": rows,
                                         "paired_change": change, "seconds": seconds,
                                         "ranks": {label(c): ranks[c] for c in COLUMNS}}, indent=2, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
