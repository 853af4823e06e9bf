"""LLM-free retrieval evaluation on LoCoMo: evidence Recall@K of the raw read path.

What it measures
    Every turn of each LoCoMo conversation is imported verbatim (`MemoryService.import_turns`)
    as a raw memory of one user (user_id = the conversation's sample_id): text = the turn's
    text, speaker = the turn's speaker (the index embeds "speaker: text"), session_id =
    "session_<n>", timestamp parsed from session_<n>_date_time ("%I:%M %p on %d %B, %Y").
    Turns that share a photo carry a `blip_caption` (an automatic description of the image,
    which the other speaker reacts to); it is appended to the text as
    " [shares a photo: <caption>]" so that questions about the picture can find the turn
    (1,226 turns carry one; --no-captions leaves them out, which is how the team's reference
    numbers were written: "speaker: text").
    The index is then optimized (HNSW built), as the daemon would, and every question is
    searched through the full read path (`svc.search`, kinds=["raw"], limit=50). A question
    counts as a hit at K when ANY of its evidence turns is among the top K hits.

    Recall@1/5/10/20/50 is printed per category (1 multi-hop, 2 temporal, 3 open-domain,
    4 single-hop, 5 adversarial) and pooled over categories 1-4 (question-weighted mean).
    Queries use the frozen embedder (query_adapter="none") unless --set query_adapter=... says
    otherwise.

Data quirks handled (see the data README): evidence strings that pack several ids
("D8:6; D9:17", "D9:1 D4:4") are split on ';' and whitespace; "D:11:26" and zero-padded
"D30:05" are normalized; a token that is no id ("D") is ignored; ids of turns that do not
exist (conv-42 D10:19, conv-47 D4:36) are dropped and counted; questions left with no
evidence are skipped (the 4 category-3 questions without any) and their number is printed.

Run
    . .venv/bin/activate
    python scripts/eval_locomo.py                      # hybrid, default settings
    python scripts/eval_locomo.py --dense-only         # alpha = 1.0
    python scripts/eval_locomo.py --alpha 0.5 --set candidate_pool=200 --json out.json
    python scripts/eval_locomo.py --limit-conversations 2   # quick run
    python scripts/eval_locomo.py --pgvector           # the pgvector index in a throwaway PostgreSQL
    python scripts/eval_locomo.py --data-dir /tmp/locomo --alpha 0.5   # keep the store; a re-run
                        # with the same --data-dir skips the import (same turns, same ids) and only
                        # searches, so read-side settings can be swept cheaply
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (1, 5, 10, 20, 50)
SEARCH_LIMIT = 50
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
EVIDENCE_ID = re.compile(r"^D:?(\d+):(\d+)$")
SESSION_KEY = re.compile(r"^session_(\d+)$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"locomo10.json (default {DEFAULT_DATA})")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="dcpm data directory (default: a fresh temporary one, deleted afterwards)")
    p.add_argument("--alpha", type=float, default=None, help="override Settings.hybrid_alpha")
    p.add_argument("--dense-only", action="store_true", help="alpha = 1.0 (no sparse retriever)")
    p.add_argument("--embedder", default=None, help="Settings.embedder (name or path)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other Settings field, e.g. --set candidate_pool=200 (repeatable)")
    p.add_argument("--no-captions", action="store_true", help="do not append blip captions to turn texts")
    p.add_argument("--limit-conversations", type=int, default=None, metavar="N", help="only the first N")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's own, = CPU cores)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the numbers as JSON")
    p.add_argument("--pgvector", action="store_true",
                   help="index in pgvector, in a PostgreSQL that pgserver starts under the data directory "
                        "(the store stays SQLite); --set pgvector_url=... names a running one instead")
    return p.parse_args(argv)


def settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    # The frozen embedder is what is measured; an associative query adapter (--set query_adapter=DIR)
    # replaces only the query vector and would be compared against this baseline.
    overrides: dict[str, Any] = {"query_adapter": "none"}
    for pair in args.overrides:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {pair!r}")
        overrides[key.strip()] = value
    if args.embedder:
        overrides["embedder"] = args.embedder
    if args.alpha is not None:
        overrides["hybrid_alpha"] = args.alpha
    if args.dense_only:
        overrides["hybrid_alpha"] = 1.0
    return overrides


# --- data -----------------------------------------------------------------------------------
def normalize_id(token: str) -> str | None:
    """'D1:3' -> 'D1:3', 'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'; anything else -> None."""
    match = EVIDENCE_ID.match(token.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def evidence_ids(raw: list[str]) -> list[str]:
    tokens = [t for entry in raw for t in re.split(r"[;\s]+", str(entry)) if t]
    return list(dict.fromkeys(i for i in map(normalize_id, tokens) if i))


def conversation_turns(sample: dict, captions: bool = True) -> list:
    """The conversation's turns as `Turn`s in session order; Turn.id is the (normalized) dia_id."""
    from dcpm.domain import Turn

    conv = sample["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := SESSION_KEY.match(key)))
    turns = []
    for number, key in sessions:
        stamp = conv.get(f"{key}_date_time")
        when = datetime.strptime(stamp, DATE_FORMAT) if stamp else None
        for turn in conv[key]:
            text = turn["text"]
            if captions and turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            dia_id = normalize_id(turn["dia_id"]) or turn["dia_id"]
            turns.append(Turn(text=text, speaker=turn["speaker"], session_id=f"session_{number}",
                              timestamp=when, metadata={"dia_id": dia_id}, id=dia_id))
    return turns


# --- run ------------------------------------------------------------------------------------
def import_conversations(svc, samples: list[dict], captions: bool = True) -> tuple[dict[str, dict[str, str]], int]:
    """Import every conversation; returns {user: {raw uuid: dia_id}} and the number imported."""
    from dcpm.write.raw import deterministic_raw_id

    prepared = [(s["sample_id"], conversation_turns(s, captions)) for s in samples]
    batch = min(svc.settings.import_batch_size, svc.settings.max_messages)
    id_maps: dict[str, dict[str, str]] = {}
    imported = 0
    with tqdm(total=sum(len(t) for _, t in prepared), desc="importing", unit="turn") as bar:
        for user_id, turns in prepared:
            for turn in turns:
                turn.id = deterministic_raw_id(user_id, turn, 0)
            id_maps[user_id] = {t.id: t.metadata["dia_id"] for t in turns}
            for start in range(0, len(turns), batch):
                chunk = turns[start:start + batch]
                imported += svc.import_turns(user_id, chunk)
                bar.update(len(chunk))
    return id_maps, imported


def evaluate(svc, samples: list[dict], id_maps: dict[str, dict[str, str]]) -> dict[str, Any]:
    from dcpm.api.models import SearchRequest

    hits: dict[int, list[int]] = defaultdict(lambda: [0] * len(KS))
    counts: dict[int, int] = defaultdict(int)
    skipped = dropped = 0
    ranks: list[dict[str, Any]] = []
    questions = [(s["sample_id"], q) for s in samples for q in s["qa"]]
    for user_id, qa in tqdm(questions, desc="questions", unit="q"):
        known = set(id_maps[user_id].values())
        wanted = evidence_ids(qa.get("evidence") or [])
        gold = {e for e in wanted if e in known}
        dropped += len(wanted) - len(gold)
        if not gold:
            skipped += 1
            continue
        result = svc.search(SearchRequest(user_id=user_id, query=qa["question"], limit=SEARCH_LIMIT,
                                          kinds=["raw"], threshold=0))  # ranking is measured, not the cut
        found = [id_maps[user_id].get(h.id, h.metadata.get("dia_id")) for h in result.hits]
        rank = next((n for n, dia in enumerate(found, 1) if dia in gold), None)
        category = int(qa["category"])
        counts[category] += 1
        for slot, k in enumerate(KS):
            hits[category][slot] += int(rank is not None and rank <= k)
        ranks.append({"user": user_id, "category": category, "rank": rank})
    per_category = {c: {"n": counts[c], **{f"R@{k}": hits[c][i] / counts[c] for i, k in enumerate(KS)}}
                    for c in sorted(counts)}
    core = [c for c in counts if 1 <= c <= 4]
    core_n = sum(counts[c] for c in core)
    overall = {"n": core_n, **{f"R@{k}": sum(hits[c][i] for c in core) / core_n if core_n else 0.0
                               for i, k in enumerate(KS)}}
    return {"per_category": per_category, "categories_1_4": overall, "skipped_questions": skipped,
            "dropped_evidence_ids": dropped, "ranks": ranks}


def print_table(report: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_edge=False)
    table.add_column("category")
    table.add_column("n", justify="right")
    for k in KS:
        table.add_column(f"R@{k}", justify="right")
    for category, row in report["per_category"].items():
        table.add_row(f"{category} {CATEGORIES.get(category, '?')}", str(row["n"]),
                      *(f"{row[f'R@{k}']:.3f}" for k in KS))
    row = report["categories_1_4"]
    table.add_section()
    table.add_row("1-4 (question-weighted)", str(row["n"]), *(f"{row[f'R@{k}']:.3f}" for k in KS), style="bold")
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.limit_conversations]
    overrides = settings_overrides(args)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="dcpm-locomo-"))

    from dcpm.config import Settings
    from dcpm.service import MemoryService

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    postgres = None
    if args.pgvector:
        overrides["index_backend"] = "pgvector"
        if "pgvector_url" not in overrides:
            import pgserver

            data_dir.mkdir(parents=True, exist_ok=True)
            postgres = pgserver.get_server(data_dir / "postgres")
            overrides["pgvector_url"] = postgres.get_uri()
    settings = Settings(data_dir=data_dir, **overrides)
    started = time.perf_counter()
    svc = MemoryService(settings)
    try:
        id_maps, imported = import_conversations(svc, samples, captions=not args.no_captions)
        import_s = time.perf_counter() - started
        t0 = time.perf_counter()
        svc.index.optimize()
        optimize_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = evaluate(svc, samples, id_maps)
        search_s = time.perf_counter() - t0
    finally:
        svc.close()
        if postgres is not None:
            postgres.cleanup()  # stopped before its data directory goes
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)

    turns = sum(len(m) for m in id_maps.values())
    searched = sum(r["n"] for r in report["per_category"].values())
    mode = "dense only" if settings.hybrid_alpha >= 1 else f"hybrid alpha={settings.hybrid_alpha}"
    print(f"\n{len(samples)} conversation(s), {turns} turns ({imported} newly imported) in {import_s:.1f}s "
          f"({turns / import_s:.0f} turns/s incl. model load); optimize {optimize_s:.1f}s")
    print(f"{searched} questions searched in {search_s:.1f}s ({1000 * search_s / max(searched, 1):.1f} ms each); "
          f"skipped {report['skipped_questions']} without usable evidence; "
          f"dropped {report['dropped_evidence_ids']} evidence id(s) of turns that do not exist")
    print_table(report, f"LoCoMo evidence recall - {settings.embedder}, {mode}, pool {settings.candidate_pool}, "
                        f"index {settings.vector_backend}")
    if args.json:
        out = {"data": str(args.data), "conversations": len(samples), "turns": turns,
               "settings": {"embedder": settings.embedder, "hybrid_alpha": settings.hybrid_alpha,
                            "candidate_pool": settings.candidate_pool, "captions": not args.no_captions,
                            **overrides},
               "seconds": {"import": import_s, "optimize": optimize_s, "search": search_s}, **report}
        args.json.write_text(json.dumps(out, indent=2, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
