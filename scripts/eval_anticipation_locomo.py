"""Does the anticipation lane hurt ordinary lookup when EVERY memory has anticipations? LoCoMo
evidence recall on one conversation stored through the writer, as a user running dcpm with an
LLM would have it.

What it measures
    One `MemoryService` (default Settings, a temporary data directory) whose LLM is a scripted
    local server (dcpm.testing.scripted_llm), one user = the conversation's sample_id. Every turn
    of the conversation (text with its photo caption, as scripts/eval_locomo.py builds it) goes
    through `svc.add_memory`, one turn per call, stamped with its session's date, metadata
    {"dia_id"}. The scripted extraction answers, for that turn, the items of its record in
    scripts/heldout/locomo_extractions/<conversation>.jsonl, with the record's anticipations on
    the first item; a turn without a record (greetings, "that's great!") yields no item, as a
    real extractor returns nothing for it. The records were written by hand playing the
    extraction model, blind to the questions (README: "Anticipations on every memory").
    Each LoCoMo question of categories 1-4 is then asked with `svc.search` (limit 10, threshold 0,
    default kinds: raw turns and items, one hit per memory); hits name their turn by
    metadata dia_id (items carry their turn's). A question is a hit at K when any of its evidence
    turns is among the top K (as scripts/eval_locomo.py counts). Four columns over the same
    store, written once with anticipations on: frozen encoder (associative=False) or the shipped
    adapter (default), each with Settings.anticipations off and on (it only switches the read
    lane). A fifth, "raw", is the same conversation imported raw with no LLM (import_turns, as
    eval_locomo stores it), frozen encoder: what extraction alone changes. The paired change lists
    the questions whose evidence entered / left the top 10 when anticipations are turned on.

Run
    . .venv/bin/activate
    python scripts/eval_anticipation_locomo.py                  # conv-26, under a minute on 2 cores
    python scripts/eval_anticipation_locomo.py --conversation conv-30   # the other one with records
    python scripts/eval_anticipation_locomo.py --json out.json
    DCPM_ANTICIPATION_TERMS_WEIGHT=0.5 python scripts/eval_anticipation_locomo.py   # any DCPM_ setting

Results: scripts/heldout/README.md, "Anticipations on every memory: LoCoMo conv-26".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from eval_anticipation_service import locomo_questions, top
from eval_locomo import CATEGORIES, DEFAULT_DATA, conversation_turns, import_conversations, normalize_id

KS = (1, 5, 10)
EXTRACTIONS = Path(__file__).resolve().parent / "heldout" / "locomo_extractions"
RAW = ("raw", False)
COLUMNS = [RAW] + [(encoder, on) for encoder in ("frozen", "adapter") for on in (False, True)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--conversation", default="conv-26", help="a sample id with a file in locomo_extractions/")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the table, changes and ranks")
    return p.parse_args(argv)


def label(column: tuple[str, bool]) -> str:
    return "raw, frozen (no LLM)" if column == RAW else f"{column[0]} {'on' if column[1] else 'off'}"


def load_records(path: Path) -> dict[str, dict]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {normalize_id(r["dia_id"]) or r["dia_id"]: r for r in records}


def write(svc, sample: dict, records: dict[str, dict], current: list) -> dict[str, int]:
    """Every turn through add_memory, one per call; `current[0]` tells the scripted extraction
    whose record to answer. Returns counts of what was stored."""
    from dcpm.api.models import AddMemoryRequest

    counts = {"turns": 0, "turns with items": 0, "items": 0, "anticipations": 0}
    for turn in conversation_turns(sample):
        record = current[0] = records.get(turn.id)
        response = svc.add_memory(AddMemoryRequest(
            user_id=sample["sample_id"], session_id=turn.session_id, timestamp=turn.timestamp,
            messages=[{"content": turn.text, "name": turn.speaker, "timestamp": turn.timestamp}],
            metadata={"dia_id": turn.id}))
        added = sum(o.op == "ADD" for o in response.operations)
        wanted = len(record["items"]) if record else 0
        if response.status != "done" or added != wanted:
            raise SystemExit(f"{turn.id}: {added} item(s) added, {wanted} expected ({response.status}: "
                             f"{response.error})")
        counts["turns"] += 1
        counts["turns with items"] += bool(record)
        counts["items"] += added
        counts["anticipations"] += len(record["anticipations"]) if record else 0
    unused = set(records) - {t.id for t in conversation_turns(sample)}
    if unused:
        raise SystemExit(f"records for turns that do not exist: {sorted(unused)}")
    return counts


def scripted_extraction(current: list):
    def extract(turns: list[str]) -> dict:
        record = current[0]
        if record is None:
            return {"items": [], "summary": None}
        return {"items": [{"kind": "fact", "text": text, "topic": "other", "salience": 0.8,
                           "anticipations": record["anticipations"] if n == 0 else []}
                          for n, text in enumerate(record["items"])], "summary": None}

    return extract


def ranks(svc, user_id: str, questions: list[dict], associative: bool) -> list[int | None]:
    """The rank (1-10) of each question's first evidence turn, None when none is in the top 10."""
    out = []
    for question in questions:
        found = [normalize_id(str(m.get("dia_id"))) for m in top(svc, user_id, question["question"], associative)]
        out.append(next((n for n, dia in enumerate(found, 1) if dia in question["evidence"]), None))
    return out


def recall(questions: list[dict], column: list[int | None], category: int | None) -> tuple[int, list[float]]:
    chosen = [r for q, r in zip(questions, column) if category is None or q["category"] == category]
    return len(chosen), [sum(r is not None and r <= k for r in chosen) / len(chosen) for k in KS]


def print_markdown(questions: list[dict], by_column: dict[tuple[str, bool], list]) -> dict:
    print("\nEvidence R@1 / R@5 / R@10 through svc.search (limit 10, default kinds); anticipations off / on = "
          "Settings.anticipations at read, same store\n")
    print("| category | n | " + " | ".join(map(label, COLUMNS)) + " |")
    print("| --- | --- |" + " --- |" * len(COLUMNS))
    table = {}
    for category in sorted({q["category"] for q in questions}) + [None]:
        name = "1-4 overall" if category is None else f"{category} {CATEGORIES[category]}"
        cells = {label(c): recall(questions, by_column[c], category) for c in COLUMNS}
        n = next(iter(cells.values()))[0]
        table[name] = {"n": n, **{col: dict(zip((f"R@{k}" for k in KS), r)) for col, (_, r) in cells.items()}}
        bold = "**" if category is None else ""
        print(f"| {bold}{name}{bold} | {n} | " + " | ".join(
            f"{bold}{' / '.join(f'{x:.3f}' for x in r)}{bold}" for _, r in cells.values()) + " |")
    return table


def mrr(column: list[int | None]) -> float:
    return sum(1 / r for r in column if r) / len(column)


def paired_change(questions: list[dict], by_column: dict[tuple[str, bool], list]) -> dict:
    change = {}
    for encoder in ("frozen", "adapter"):
        off, on = by_column[(encoder, False)], by_column[(encoder, True)]
        entered = [q for q, a, b in zip(questions, off, on) if a is None and b is not None]
        left = [q for q, a, b in zip(questions, off, on) if a is not None and b is None]
        better = sum(b is not None and (a is None or b < a) for a, b in zip(off, on))
        worse = sum(a is not None and (b is None or b > a) for a, b in zip(off, on))
        change[encoder] = {"entered": entered, "left": left, "rank better": better, "rank worse": worse}
        print(f"\nPaired change, {encoder}: anticipations off -> on, evidence entered the top 10 for "
              f"{len(entered)}, left it for {len(left)}; first evidence ranked higher for {better}, lower for "
              f"{worse}; MRR@10 {mrr(off):.3f} -> {mrr(on):.3f}")
        for sign, rows in (("+", entered), ("-", left)):
            for q in rows:
                print(f"  {sign} [{q['category']}] {q['question']}  (evidence {', '.join(q['evidence'])})")
    return change


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = EXTRACTIONS / f"{args.conversation}.jsonl"
    if not path.exists():
        raise SystemExit(f"no extraction records at {path}")
    records = load_records(path)
    sample = next((s for s in json.loads(args.data.read_text(encoding="utf-8"))
                   if s["sample_id"] == args.conversation), None)
    if sample is None:
        raise SystemExit(f"{args.conversation} is not in {args.data}")
    questions = locomo_questions(sample)

    import torch

    from dcpm.config import Settings
    from dcpm.service import MemoryService
    from dcpm.testing.scripted_llm import LLMServer

    torch.set_num_threads(args.threads)
    user_id = sample["sample_id"]
    by_column: dict[tuple[str, bool], list] = {}
    seconds: dict[str, float] = {}
    current: list = [None]
    llm_dir = Path(tempfile.mkdtemp(prefix="dcpm-antic-locomo-"))
    raw_dir = Path(tempfile.mkdtemp(prefix="dcpm-antic-locomo-raw-"))
    started = time.perf_counter()
    try:
        with LLMServer() as llm:
            llm.script.extract = scripted_extraction(current)
            svc = MemoryService(Settings(data_dir=llm_dir, llm_base_url=llm.url, llm_model="scripted"))
            try:
                t0 = time.perf_counter()
                counts = write(svc, sample, records, current)
                svc.index.optimize()
                seconds["write (add_memory)"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                for encoder, on in COLUMNS[1:]:
                    svc.settings.anticipations = on
                    by_column[(encoder, on)] = ranks(svc, user_id, questions, associative=encoder == "adapter")
                svc.settings.anticipations = True
                seconds["search (4 columns)"] = time.perf_counter() - t0
                embedder = svc.embedder
            finally:
                svc.close()
        raw = MemoryService(Settings(data_dir=raw_dir), embedder=embedder)
        try:
            t0 = time.perf_counter()
            import_conversations(raw, [sample])
            raw.index.optimize()
            by_column[RAW] = ranks(raw, user_id, questions, associative=False)
            seconds["raw import + search"] = time.perf_counter() - t0
        finally:
            raw.close()
    finally:
        shutil.rmtree(llm_dir, ignore_errors=True)
        shutil.rmtree(raw_dir, ignore_errors=True)
    seconds["total"] = time.perf_counter() - started

    print(f"\n{user_id}: {counts['turns']} turns through add_memory, {counts['turns with items']} with items "
          f"({counts['items']} items, {counts['anticipations']} anticipations); {len(questions)} questions "
          f"(categories 1-4); " + ", ".join(f"{k} {v:.0f}s" for k, v in seconds.items()))
    table = print_markdown(questions, by_column)
    change = paired_change(questions, by_column)
    if args.json:
        args.json.write_text(json.dumps({"conversation": user_id, "counts": counts, "seconds": seconds,
                                         "table": table, "paired_change": change,
                                         "ranks": {label(c): by_column[c] for c in COLUMNS},
                                         "questions": questions}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
