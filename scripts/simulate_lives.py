"""The life simulator (Madeleine 4.2, appendix A) and the corpus checks that run without an LLM.

generate
    One LLM call per persona through the `openai` client (any OpenAI-compatible endpoint):
    personas come from scripts/lives/personas.py (`sample_personas(source, count, seed)`), the
    prompt and the answer model from dcpm/adapter/training/life_prompt.py; an answer that is not valid
    JSON of that model is asked for again (3 tries). Appends one persona per line to --out and
    skips personas already there, so an interrupted run resumes.

check
    Validates corpus files, prints per source the personas, facts and rows and the mean
    earlier-later cosine under the frozen embedder E, then applies the filters and reports
    what they drop: the similarity filter (later messages with cos >= --max-pair-cos to their
    own statement teach similarity, not association) and decontamination (every row with
    cos >= --decontaminate-cos to any text of --decontaminate: LoCoMo json, JSONL or plain
    text). With --out, the kept corpus is written there, ready for `dcpm adapter train`.

Run
    . .venv/bin/activate
    python scripts/simulate_lives.py check scripts/lives/corpus/*.jsonl \\
        --decontaminate ../shared/data/locomo/locomo10.json --out /tmp/lives.clean.jsonl
    python scripts/simulate_lives.py generate --source friends --count 27 --seed 0 \\
        --base-url http://localhost:8000/v1 --model my-model --out /tmp/friends.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts" / "lives"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from dcpm.config import Settings

    defaults = Settings()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = p.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="simulate lives with an LLM")
    gen.add_argument("--source", choices=["assistant", "friends"], required=True)
    gen.add_argument("--count", type=int, default=27, help="personas to simulate")
    gen.add_argument("--first", type=int, default=1, help="number of the first persona (1-based)")
    gen.add_argument("--seed", type=int, default=0, help="persona sampling seed")
    gen.add_argument("--statements", type=int, default=10, help="earlier statements per persona")
    gen.add_argument("--out", type=Path, required=True)
    gen.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL") or defaults.llm_base_url or None)
    gen.add_argument("--model", default=os.environ.get("OPENAI_MODEL") or defaults.llm_model or None)
    gen.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY")
                     or defaults.llm_api_key.get_secret_value() or "none")
    gen.add_argument("--temperature", type=float, default=1.0)
    chk = commands.add_parser("check", help="statistics and filters of existing corpus files (no LLM)")
    chk.add_argument("files", nargs="+", type=Path)
    chk.add_argument("--max-pair-cos", type=float, default=defaults.adapter_pair_max_cos,
                     help=f"drop later messages at least this close to their statement (default "
                          f"{defaults.adapter_pair_max_cos}; 1 disables)")
    chk.add_argument("--decontaminate", type=Path, action="append", default=[], metavar="EVAL_FILE",
                     help="evaluation texts no training row may resemble (repeatable)")
    chk.add_argument("--decontaminate-cos", type=float, default=defaults.adapter_decontaminate_cos)
    chk.add_argument("--out", type=Path, default=None, help="write the kept corpus here")
    chk.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    return p.parse_args(argv)


# --- generate -------------------------------------------------------------------------------
def simulate(client, model: str, persona, temperature: float):  # type: ignore[no-untyped-def]
    """One LLM call for one persona, validated; retried when the answer is not the model."""
    from pydantic import ValidationError
    from tenacity import retry, retry_if_exception_type, stop_after_attempt

    from dcpm.adapter.training.life_prompt import SimulatedLife, render

    prompt = render(persona.source, persona.age, persona.job, persona.place, persona.areas, persona.kinds)

    @retry(stop=stop_after_attempt(3), retry=retry_if_exception_type((ValidationError, ValueError)), reraise=True)
    def ask() -> SimulatedLife:
        answer = client.chat.completions.create(model=model, temperature=temperature,
                                                messages=[{"role": "user", "content": prompt}],
                                                response_format={"type": "json_object"})
        text = (answer.choices[0].message.content or "").strip()
        text = text.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
        return SimulatedLife.model_validate_json(text)

    return ask()


def generate(args: argparse.Namespace) -> int:
    from openai import OpenAI
    from personas import sample_personas
    from tqdm import tqdm

    from dcpm.adapter.training.lives import Life, Statement, read_lives

    if not args.model:
        raise SystemExit("--model (or OPENAI_MODEL / DCPM_LLM_MODEL) is required")
    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    personas = sample_personas(args.source, args.first + args.count - 1, args.seed, args.statements)[args.first - 1:]
    done = {life.persona_id for life in read_lives([args.out])} if args.out.exists() else set()
    with args.out.open("a", encoding="utf-8") as sink:
        for persona in tqdm([p for p in personas if p.persona_id not in done], desc=f"simulating {args.source}"):
            answer = simulate(client, args.model, persona, args.temperature)
            life = Life(persona_id=persona.persona_id, source=persona.source, age=persona.age, job=persona.job,
                        place=persona.place, facts=[Statement(**s.model_dump()) for s in answer.facts])
            sink.write(life.model_dump_json() + "\n")
            sink.flush()
    return 0


# --- check ----------------------------------------------------------------------------------
def check(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from dcpm.adapter.training.curation import corpus_stats, decontaminate, drop_similar_pairs, evaluation_texts
    from dcpm.adapter.training.lives import read_lives, write_lives
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    lives = read_lives(args.files)
    embedder = load_embedder(Settings())
    cache: dict[str, object] = {}

    def embed(texts):  # type: ignore[no-untyped-def]
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        for text, vector in zip(missing, embedder.dense(missing)):
            cache[text] = vector
        return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, embedder.dim), np.float32)

    report: dict = {"files": [str(f) for f in args.files], "before": corpus_stats(lives, embed)}
    lives, similar = drop_similar_pairs(lives, embed, args.max_pair_cos)
    report["similar_pairs_dropped"] = {"max_pair_cos": args.max_pair_cos, **similar}
    report["decontamination"] = {"max_cos": args.decontaminate_cos, "files": [str(f) for f in args.decontaminate]}
    if args.decontaminate:
        texts = [t for path in args.decontaminate for t in evaluation_texts(path)]
        reference = embedder.dense(texts)
        lives, contaminated = decontaminate(lives, embed, reference, args.decontaminate_cos)
        report["decontamination"].update({"texts": len(texts), **contaminated})
    report["after"] = corpus_stats(lives, embed)
    console = Console(width=None if sys.stdout.isatty() else 140)
    for stage in ("before", "after"):
        table = Table(title=f"corpus {stage} filtering", show_edge=False)
        columns = ("personas", "facts", "later", "direct", "rows", "later_cos_mean", "later_cos_p95",
                   "later_cos_max", "direct_cos_mean")
        table.add_column("source")
        for column in columns:
            table.add_column(column, justify="right")
        for source, row in report[stage].items():
            table.add_row(source, *(str(row[c]) for c in columns))
        console.print(table)
    console.print(f"similarity filter (cos >= {args.max_pair_cos}): dropped {dict(similar) or 'nothing'}")
    if args.decontaminate:
        console.print(f"decontamination against {report['decontamination']['texts']} texts "
                      f"(cos >= {args.decontaminate_cos}): dropped {dict(contaminated) or 'nothing'}")
    if args.out:
        write_lives(lives, args.out)
        console.print(f"wrote {len(lives)} personas to {args.out}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return generate(args) if args.command == "generate" else check(args)


if __name__ == "__main__":
    raise SystemExit(main())
