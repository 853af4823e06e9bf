"""Associative cue recall on held-out simulated lives: frozen E against E + adapter.

What it measures
    The held-out personas are the ones the adapter's manifest lists (`heldout_personas`, drawn
    per source with the training seed), so no held-out persona was ever trained on. Each
    held-out later message ("cue" query: it must not mention its earlier statement) is ranked
    against the facts of its own source, and so is each direct question (ordinary lookup,
    reported separately). Rank = 1 + candidates scored strictly above the gold fact.

    Candidates (--candidates), always the facts of the query's source, as the paper ranks a
    row among its source's facts:
      "heldout" (default): the held-out facts only (120 per source: 12 personas x 10). No
        candidate was seen in training, so the number measures generalization to new lives,
        and the pool looks like a memory: one user's facts among a few other people's.
      "all": plus every training fact of the source (~2,300). A stress test: the gold must beat
        ~100 facts of its own kind from other lives (e.g. every "medication" fact) that the
        adapter learned as positives for other triggers, which biases it against the adapter.

    Common lives repeat across personas (two people on a CPAP machine), so a held-out fact may
    have a near-twin among the training facts whose triggers the adapter has learned. A third
    table keeps only the held-out facts without one (cos >= --twin-cos, default 0.85).

    Prints Recall@1/5/10/50 and MRR per source and overall for both encoders and the lift.

Run
    . .venv/bin/activate
    python scripts/eval_associative.py                         # shipped adapter, its corpus
    python scripts/eval_associative.py --adapter /tmp/my-adapter --corpus /tmp/lives.clean.jsonl
    python scripts/eval_associative.py --candidates all --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO / "scripts" / "lives" / "clean.jsonl"
KS = (1, 5, 10, 50)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--adapter", default="default", help="adapter directory (default: the shipped one)")
    p.add_argument("--corpus", type=Path, nargs="+", default=[DEFAULT_CORPUS],
                   help=f"the corpus the adapter was trained on (default {DEFAULT_CORPUS.relative_to(REPO)})")
    p.add_argument("--candidates", choices=["heldout", "all"], default="heldout")
    p.add_argument("--twin-cos", type=float, default=0.85,
                   help="a held-out fact with a training fact this close is reported apart (default 0.85)")
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.console import Console
    from rich.table import Table

    from dcpm.adapter.encoder import AssociativeQueryEncoder, adapter_directory
    from dcpm.adapter.manifest import read_manifest
    from dcpm.adapter.training.evaluation import cue_set, evaluate, query_vectors, seen_in_training
    from dcpm.adapter.training.lives import facts_and_rows, read_lives, rows_hash
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    directory = adapter_directory(args.adapter)
    if directory is None:
        raise SystemExit("--adapter none: nothing to evaluate")
    manifest = read_manifest(directory)
    held_ids = set(manifest.training.heldout_personas)
    if not held_ids:
        raise SystemExit(f"{directory} was trained without held-out personas (holdout=0)")
    lives = read_lives(args.corpus)
    heldout = [life for life in lives if life.persona_id in held_ids]
    training = [life for life in lives if life.persona_id not in held_ids]
    missing = held_ids - {life.persona_id for life in heldout}
    if missing:
        raise SystemExit(f"held-out personas not in the corpus: {sorted(missing)}")
    same_data = rows_hash(*facts_and_rows(training)) == manifest.training.data_hash
    embedder = load_embedder(Settings())
    encoder = AssociativeQueryEncoder(embedder, directory)
    # Held-out facts come first, so the "heldout" pool is a prefix of "all"; every training fact is
    # embedded either way, for the twin check.
    all_facts, rows = cue_set(training, heldout, "all")
    all_bank = embedder.dense([fact.text for fact in all_facts])
    held = len(cue_set(training, heldout, "heldout")[0])
    size = len(all_facts) if args.candidates == "all" else held
    facts, bank = all_facts[:size], all_bank[:size]
    queries = query_vectors(rows, {"frozen": embedder.dense_queries, "adapter": encoder.dense_queries})
    report = evaluate(facts, rows, bank, queries)
    seen = seen_in_training(all_facts[:held], all_bank[:held], all_facts[held:], all_bank[held:], args.twin_cos)
    novel_at = [i for i, row in enumerate(rows) if not seen[row.fact]]
    novel = evaluate(facts, [rows[i] for i in novel_at], bank,
                     {name: vectors[novel_at] for name, vectors in queries.items()})

    console = Console(width=None if sys.stdout.isatty() else 140)
    per_source = ", ".join(f"{n} {source}" for source, n in sorted(Counter(f.source for f in facts).items()))
    console.print(f"adapter {manifest.name} ({directory}); {len(heldout)} held-out personas; candidate facts "
                  f"({args.candidates}): {per_source}; training rows "
                  f"{'match' if same_data else 'DO NOT match'} the manifest")
    titles = {"later": "cue (later message) recall", "direct": "direct question recall",
              "novel": f"cue recall, the {int((~seen).sum())} of {len(seen)} held-out facts without a training "
                       f"twin (cos >= {args.twin_cos})"}
    for kind, title in titles.items():
        table = Table(title=title, show_edge=False)
        shown = novel if kind == "novel" else report
        kind = "later" if kind == "novel" else kind
        for column in ("source", "encoder", "n", *(f"R@{k}" for k in KS), "MRR"):
            table.add_column(column, justify="right")
        for source in shown["frozen"]:
            base, adapted = shown["frozen"][source][kind], shown["adapter"][source][kind]
            for name, row in (("frozen", base), ("adapter", adapted)):
                table.add_row(source, name, str(row["n"]), *(f"{100 * row[f'R@{k}']:.1f}" for k in KS),
                              f"{row['MRR']:.3f}")
            table.add_row(source, "lift", "", *(f"{100 * (adapted[f'R@{k}'] - base[f'R@{k}']):+.1f}" for k in KS),
                          f"{adapted['MRR'] - base['MRR']:+.3f}", style="bold")
            table.add_section()
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps({"adapter": str(directory), "candidates": args.candidates,
                                         "heldout_personas": sorted(held_ids), "training_data_matches": same_data,
                                         "report": report, "twin_cos": args.twin_cos,
                                         "heldout_facts_with_training_twin": int(seen.sum()),
                                         "report_without_twins": novel}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
