"""Associative recall on conversations no training writer touched: cue and fact Recall@K of the raw read path.

What it measures
    The haystack is the ten LoCoMo conversations (written by LoCoMo's authors, not by anyone who
    wrote the adapter's training lives). Into each, scripts/heldout/conv-*.json inserts turns of
    its own two speakers, written for this set in the register of two friends texting (lowercase,
    fragments, slang), each composed on its own, never from the training corpus or its prompt:
      cue pairs: a cue said in passing inside a longer turn of an early session (a bad knee, a
        lease running out, a value the speaker holds), and a trigger said weeks later that shares
        no content word with it (a downhill race, a home-study visit): causes and consequences,
        states of health, mood and circumstance, goals and plans, values and preferences;
      indirect facts: one personal fact said once in passing (blood thinners), an indirect
        question weeks later that only everyday knowledge connects to it (a big tattoo), and a
        direct question about the fact.
    Every conversation is imported through the real service (`MemoryService.import_turns`) as
    the raw turns of one user (user_id = sample_id): LoCoMo turns with their blip captions, as
    scripts/eval_locomo.py imports them, plus the inserted cue and fact turns, all stamped with
    their session's LoCoMo date. Triggers and questions are NOT inserted; each is the query of
    `svc.search` (kinds=["raw"], threshold 0, limit 50) over its own conversation's memories,
    and the rank of its cue or fact turn is recorded. Recall@1/5/10 and MRR (0 beyond rank 50)
    are reported per set (cue, indirect, direct) for each query-encoder mode:
      frozen   query_adapter="none" (the frozen embedder E)
      replace  the shipped adapter replaces the dense query inside the hybrid score
      rrf_hybrid  the "replace" ranking (adapter dense + BM25) fused with the frozen hybrid one
      rrf      the shipped adapter's dense lane fused with the frozen hybrid ranking (needs the
               adapter_fusion setting)
    The index is built once; only the query side differs between modes, so every mode ranks the
    same memories.
    --distractors also inserts into each conversation the cue and fact turns of the nine other
    conversations, spoken by its own two speakers: the same writer and register as its targets,
    about other things. Inserted turns are foreign to LoCoMo's register, so any ranking that
    favours unusual turns (a hubness correction: scripts/eval_hubness.py) lifts them without
    associating anything; with same-writer distractors beside them it cannot.
    Why writer-disjoint: the adapter was trained on simulated lives written for scripts/lives/
    (one register, one set of writers); neither the haystack nor the inserted turns were written
    by them or seen in training, so a gain here is association that transfers.

Run
    . .venv/bin/activate
    python scripts/eval_heldout.py                                  # frozen,replace; all 10 conversations
    python scripts/eval_heldout.py --modes frozen,replace,rrf --json heldout.json
    python scripts/eval_heldout.py --conversations conv-26,conv-30 --threads 2
    python scripts/eval_heldout.py --modes frozen,replace,replace@/tmp/my-adapter   # MODE@DIR: another adapter
    python scripts/eval_heldout.py --modes frozen,rrf+adapter_lane_weight=0.5      # +KEY=VALUE: a setting

Results: scripts/heldout/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HELDOUT = REPO / "scripts" / "heldout"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
KS = (1, 5, 10)
SEARCH_LIMIT = 50
SETS = ("cue", "indirect", "direct")
MODES: dict[str, dict[str, str]] = {
    "frozen": {"query_adapter": "none"},
    "replace": {"query_adapter": "default", "adapter_fusion": "replace"},
    "rrf": {"query_adapter": "default", "adapter_fusion": "rrf"},
    "rrf_hybrid": {"query_adapter": "default", "adapter_fusion": "rrf_hybrid"},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--modes", default="frozen,replace",
                   help=f"comma-separated, of {', '.join(MODES)}; MODE@DIR uses the adapter in DIR")
    p.add_argument("--conversations", default=None, help="comma-separated sample ids (default: all)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"locomo10.json (default {DEFAULT_DATA})")
    p.add_argument("--heldout", type=Path, default=HELDOUT, help="folder of conv-*.json (default scripts/heldout)")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--distractors", action="store_true",
                   help="insert the other conversations' cue and fact turns too, as same-writer distractors")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the numbers and ranks as JSON")
    return p.parse_args(argv)


# --- data -----------------------------------------------------------------------------------
def load_heldout(folder: Path, wanted: set[str] | None) -> dict[str, dict]:
    sets = {}
    for path in sorted(folder.glob("conv-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if wanted is None or data["conversation"] in wanted:
            sets[data["conversation"]] = data
    return sets


def inserted_turns(heldout: dict) -> list[tuple[str, dict]]:
    """(turn id, insertion) of every cue and fact turn; triggers and questions are queries only."""
    return ([(f"{pair['id']}:cue", pair["cue"]) for pair in heldout["cue_pairs"]]
            + [(f"{item['id']}:fact", item["fact"]) for item in heldout["indirect_facts"]])


def queries(heldout: dict) -> list[dict[str, str]]:
    rows = [{"set": "cue", "id": pair["id"], "kind": pair["kind"], "text": pair["trigger"]["text"],
             "target": f"{pair['id']}:cue"} for pair in heldout["cue_pairs"]]
    for item in heldout["indirect_facts"]:
        for kind in ("indirect", "direct"):
            rows.append({"set": kind, "id": item["id"], "kind": kind, "text": item[kind]["text"],
                         "target": f"{item['id']}:fact"})
    return rows


def misfits(sample: dict, heldout: dict) -> list[str]:
    """What in `heldout` does not fit its LoCoMo conversation: an insertion point past its
    session's end, a speaker who is not one of the two, a trigger or question less than 14 days
    after its cue or fact, a cue or fact in the second half of the sessions."""
    conv = sample["conversation"]
    speakers = {conv["speaker_a"], conv["speaker_b"]}
    numbers = sorted(int(key.split("_")[1]) for key in conv if key.startswith("session_") and key[8:].isdigit())
    half = numbers[len(numbers) // 2]
    day = {f"session_{n}": datetime.strptime(conv[f"session_{n}_date_time"], DATE_FORMAT) for n in numbers}
    later = ([(p["id"], p["cue"], p["trigger"]) for p in heldout["cue_pairs"]]
             + [(f["id"], f["fact"], f[q]) for f in heldout["indirect_facts"] for q in ("indirect", "direct")])
    problems = []
    for item_id, earlier, query in later:
        if earlier["session"] not in day or not -1 <= earlier["after"] < len(conv[earlier["session"]]):
            problems.append(f"{item_id}: no turn {earlier['after']} in {earlier['session']}")
            continue
        if query["session"] not in day:
            problems.append(f"{item_id}: no {query['session']}")
            continue
        if {earlier["speaker"], query["speaker"]} - speakers:
            problems.append(f"{item_id}: a speaker is not one of {sorted(speakers)}")
        if day[query["session"]] - day[earlier["session"]] < timedelta(days=14):
            problems.append(f"{item_id}: asked less than 14 days after it was said")
        if int(earlier["session"].split("_")[1]) > half:
            problems.append(f"{item_id}: said in the second half of the sessions")
    return problems


def distractor_turns(sample: dict, others: list[tuple[dict, dict]]) -> list[tuple[str, dict]]:
    """The cue and fact turns of other conversations, moved into this one: each spoken by the
    speaker in the same role (speaker_a or speaker_b) and placed at the same point of its session,
    or of the last session when this conversation has fewer (ids `other/turn id`, never a target)."""
    conv = sample["conversation"]
    sessions = [key for key in conv if key.startswith("session_") and key[8:].isdigit()]
    last = max(sessions, key=lambda key: int(key[8:]))
    moved = []
    for other_sample, other in others:  # (LoCoMo sample, its held-out insertions)
        speakers = other_sample["conversation"]
        roles = {speakers["speaker_a"]: conv["speaker_a"], speakers["speaker_b"]: conv["speaker_b"]}
        for turn_id, insertion in inserted_turns(other):
            session = insertion["session"] if insertion["session"] in conv else last
            after = min(insertion["after"], len(conv[session]) - 1)
            moved.append((f"{other['conversation']}/{turn_id}",
                          {**insertion, "session": session, "after": after, "speaker": roles[insertion["speaker"]]}))
    return moved


def conversation_turns(sample: dict, heldout: dict, distractors: list[tuple[str, dict]] = ()) -> list:
    """LoCoMo turns in session order (captions appended as scripts/eval_locomo.py does), with each
    inserted turn (and distractor) placed after LoCoMo turn `after` (0-based; -1 = first) of its session."""
    from dcpm.domain import Turn

    conv = sample["conversation"]
    inserts: dict[tuple[str, int], list[tuple[str, dict]]] = defaultdict(list)
    for turn_id, insertion in [*inserted_turns(heldout), *distractors]:
        inserts[(insertion["session"], insertion["after"])].append((turn_id, insertion))
    numbers = sorted(int(key.split("_")[1]) for key in conv if key.startswith("session_") and key[8:].isdigit())
    turns = []
    for number in numbers:
        key = f"session_{number}"
        when = datetime.strptime(conv[f"{key}_date_time"], DATE_FORMAT)
        spoken = [(turn_id, ins["speaker"], ins["text"]) for turn_id, ins in inserts.get((key, -1), [])]
        for index, turn in enumerate(conv[key]):
            caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
            spoken.append((turn["dia_id"], turn["speaker"], turn["text"] + caption))
            spoken += [(turn_id, ins["speaker"], ins["text"]) for turn_id, ins in inserts.get((key, index), [])]
        turns += [Turn(text=text, speaker=speaker, session_id=key, timestamp=when, metadata={"dia_id": turn_id},
                       id=turn_id) for turn_id, speaker, text in spoken]
    placed = {t.id for t in turns}
    missing = [turn_id for turn_id, _ in inserted_turns(heldout) if turn_id not in placed]
    if missing:
        raise SystemExit(f"{sample['sample_id']}: insertion points not in the conversation: {missing}")
    return turns


# --- run ------------------------------------------------------------------------------------
def import_conversations(svc, samples: list[dict], heldout: dict[str, dict], distractors: bool = False) -> int:
    """Import every conversation as one user's raw turns; hits name their turn by metadata dia_id."""
    from dcpm.write.raw import deterministic_raw_id

    batch = min(svc.settings.import_batch_size, svc.settings.max_messages)
    imported = 0
    for sample in samples:
        others = [(other, heldout[other["sample_id"]]) for other in samples
                  if distractors and other is not sample]
        turns = conversation_turns(sample, heldout[sample["sample_id"]], distractor_turns(sample, others))
        for turn in turns:  # the store wants UUIDs; deterministic ones, as scripts/eval_locomo.py makes
            turn.id = deterministic_raw_id(sample["sample_id"], turn, 0)
        for start in range(0, len(turns), batch):
            svc.import_turns(sample["sample_id"], turns[start:start + batch])
        imported += len(turns)
    return imported


def ranks_for_mode(svc, heldout: dict[str, dict], associative: bool) -> list[dict]:
    from dcpm.api.models import SearchRequest

    rows = []
    for user_id, data in heldout.items():
        for query in queries(data):
            result = svc.search(SearchRequest(user_id=user_id, query=query["text"], limit=SEARCH_LIMIT,
                                              kinds=["raw"], threshold=0, associative=associative))
            found = [hit.metadata.get("dia_id") for hit in result.hits]
            rank = found.index(query["target"]) + 1 if query["target"] in found else None
            distracted = sum("/" in (name or "") for name in found[:10])
            rows.append({"user": user_id, **query, "rank": rank, "distractors_in_top10": distracted})
    return rows


def summarize(rows: list[dict]) -> dict[str, dict[str, float]]:
    out = {}
    for name in SETS:
        ranks = [r["rank"] for r in rows if r["set"] == name]
        if ranks:
            out[name] = {"n": len(ranks), **{f"R@{k}": sum(r is not None and r <= k for r in ranks) / len(ranks)
                                             for k in KS},
                         "MRR": sum(1 / r for r in ranks if r) / len(ranks),
                         "distractors@10": sum(r.get("distractors_in_top10", 0) for r in rows if r["set"] == name)
                         / len(ranks)}
    kinds = sorted({r["kind"] for r in rows if r["set"] == "cue"})
    for kind in kinds:
        ranks = [r["rank"] for r in rows if r["set"] == "cue" and r["kind"] == kind]
        out[f"cue:{kind}"] = {"n": len(ranks), "R@10": sum(r is not None and r <= 10 for r in ranks) / len(ranks)}
    return out


def paired_change(base: list[dict], rows: list[dict]) -> dict[str, list[int]]:
    """Per set, [queries whose target entered the top 10, queries whose target left it] against `base`
    (the same queries in the same order): with n = 40-80, a gain of a few points is within noise."""
    change: dict[str, list[int]] = {name: [0, 0] for name in SETS}
    for before, after in zip(base, rows):
        hit_before = before["rank"] is not None and before["rank"] <= 10
        hit_after = after["rank"] is not None and after["rank"] <= 10
        change[after["set"]][0] += int(hit_after and not hit_before)
        change[after["set"]][1] += int(hit_before and not hit_after)
    return change


def mode_settings_of(token: str) -> dict[str, str]:
    """The settings a mode sets: MODE[@DIR][+KEY=VALUE...], DIR naming the adapter."""
    name, *extra = token.split("+")
    name, _, adapter = name.partition("@")
    return {**MODES[name], **({"query_adapter": adapter} if adapter else {}),
            **dict(item.split("=", 1) for item in extra)}


def _known(token: str) -> bool:
    try:
        mode_settings_of(token)
    except (KeyError, ValueError):  # an unknown mode, or a +KEY without =VALUE
        return False
    return True


def mode_settings(name: str, data_dir: Path):
    from dcpm.config import Settings

    overrides = mode_settings_of(name)
    if "adapter_fusion" not in Settings.model_fields:
        if overrides.get("adapter_fusion", "replace") != "replace":
            raise SystemExit(f"mode {name!r} needs Settings.adapter_fusion, which this checkout does not have")
        overrides.pop("adapter_fusion", None)  # replace is the only behaviour there is
    return Settings(data_dir=data_dir, **overrides)


def print_tables(report: dict[str, dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="held-out (writer-disjoint) recall of the cue / fact turn", show_edge=False)
    first = next(iter(report))
    for column in ("set", "mode", "n", *(f"R@{k}" for k in KS), "MRR", f"top-10 in/out vs {first}"):
        table.add_column(column, justify="right")
    for name in SETS:
        for mode, summary in report.items():
            if name in summary:
                row = summary[name]
                moved = f"+{row['top10_in']} / -{row['top10_out']}" if "top10_in" in row else ""
                table.add_row(name, mode, str(row["n"]), *(f"{row[f'R@{k}']:.3f}" for k in KS), f"{row['MRR']:.3f}",
                              moved)
        table.add_section()
    Console(width=120).print(table)
    kinds = sorted({key for summary in report.values() for key in summary if key.startswith("cue:")})
    by_kind = Table(title="cue R@10 by kind", show_edge=False)
    for column in ("kind", "n", *report):
        by_kind.add_column(column, justify="right")
    for key in kinds:
        first = next(iter(report.values()))[key]
        by_kind.add_row(key[4:], str(first["n"]), *(f"{summary[key]['R@10']:.3f}" for summary in report.values()))
    Console(width=120).print(by_kind)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m.startswith("frozen@") or not _known(m)]
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; known: {list(MODES)}")
    wanted = set(args.conversations.split(",")) if args.conversations else None
    heldout = load_heldout(args.heldout, wanted)
    samples = [s for s in json.loads(args.data.read_text(encoding="utf-8")) if s["sample_id"] in heldout]
    if not samples:
        raise SystemExit("no conversation selected")
    problems = [problem for sample in samples for problem in misfits(sample, heldout[sample["sample_id"]])]
    if problems:
        raise SystemExit("the held-out set does not fit LoCoMo:\n" + "\n".join(problems))

    import torch

    from dcpm.service import MemoryService

    torch.set_num_threads(args.threads)
    data_dir = Path(tempfile.mkdtemp(prefix="dcpm-heldout-"))
    report, ranks, seconds = {}, {}, {}
    try:
        started = time.perf_counter()
        svc = MemoryService(mode_settings("frozen", data_dir))
        embedder = svc.embedder
        try:
            turns = import_conversations(svc, samples, heldout, args.distractors)
            svc.index.optimize()
        finally:
            svc.close()
        seconds["import"] = time.perf_counter() - started
        for mode in modes:  # same store and index; a fresh service per mode only changes the query side
            started = time.perf_counter()
            svc = MemoryService(mode_settings(mode, data_dir), embedder=embedder)
            try:
                ranks[mode] = ranks_for_mode(svc, heldout, associative=not mode.startswith("frozen"))
            finally:
                svc.close()
            report[mode] = summarize(ranks[mode])
            if mode != modes[0]:
                for name, (entered, left) in paired_change(ranks[modes[0]], ranks[mode]).items():
                    report[mode][name].update(top10_in=entered, top10_out=left)
            seconds[mode] = time.perf_counter() - started
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    print(f"{len(samples)} conversation(s): {', '.join(s['sample_id'] for s in samples)}; {turns} turns imported; "
          + ", ".join(f"{name} {s:.0f}s" for name, s in seconds.items()))
    print_tables(report)
    if args.json:
        args.json.write_text(json.dumps({"conversations": [s["sample_id"] for s in samples], "turns": turns,
                                         "modes": {m: mode_settings_of(m) for m in modes}, "report": report,
                                         "ranks": ranks, "seconds": seconds}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
