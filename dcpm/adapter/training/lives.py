"""Simulated lives, the adapter's training data (Madeleine 4.2, appendix A).

One persona per JSONL line: earlier statements ("facts"), each with later messages that must
not hint at it and one direct question. Every later message and every direct question is a
training row `query -> its fact`; the persona's other facts are natural hard negatives.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Sequence

from pydantic import BaseModel, Field, ValidationError

from dcpm.errors import Invalid


class Statement(BaseModel):
    kind: str
    area: str
    fact: str = Field(min_length=1)
    later: list[str] = Field(default_factory=list)
    direct: str | None = None  # None once a filter has dropped it


class Life(BaseModel):
    persona_id: str
    source: str
    age: int
    job: str
    place: str
    facts: list[Statement]


@dataclass(frozen=True)
class Row:
    """One training pair; `fact` indexes the fact list it was built with."""

    query: str
    fact: int
    source: str
    persona_id: str
    kind: Literal["later", "direct"]


@dataclass(frozen=True)
class Fact:
    text: str
    source: str
    persona_id: str


def read_lives(paths: Iterable[Path]) -> list[Life]:
    """Every persona of the given JSONL files, validated; a bad line names its file and line."""
    lives = []
    for path in paths:
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                lives.append(Life.model_validate_json(line))
            except ValidationError as exc:
                raise Invalid(f"{path}:{number}: not a simulated life: {exc.errors()[0]['msg']}") from None
    seen: set[str] = set()
    for life in lives:
        if life.persona_id in seen:
            raise Invalid(f"persona {life.persona_id} appears twice in the corpus")
        seen.add(life.persona_id)
    return lives


def write_lives(lives: Sequence[Life], path: Path) -> None:
    Path(path).write_text("".join(life.model_dump_json(exclude_none=True) + "\n" for life in lives),
                          encoding="utf-8")


def facts_and_rows(lives: Sequence[Life], include_direct: bool = True) -> tuple[list[Fact], list[Row]]:
    facts: list[Fact] = []
    rows: list[Row] = []
    for life in lives:
        for statement in life.facts:
            index = len(facts)
            facts.append(Fact(statement.fact, life.source, life.persona_id))
            rows.extend(Row(text, index, life.source, life.persona_id, "later") for text in statement.later)
            if include_direct and statement.direct:
                rows.append(Row(statement.direct, index, life.source, life.persona_id, "direct"))
    return facts, rows


def split_personas(lives: Sequence[Life], holdout: float, seed: int) -> tuple[list[Life], list[Life]]:
    """(training, held out): `holdout` of each source's personas, at least one when the source
    has two or more and holdout > 0, drawn with a fixed seed so training and evaluation agree."""
    held: set[str] = set()
    for source in sorted({life.source for life in lives}):
        ids = sorted(life.persona_id for life in lives if life.source == source)
        count = round(holdout * len(ids))
        if holdout > 0 and len(ids) > 1:
            count = max(1, count)
        held.update(random.Random(f"{source}:{seed}").sample(ids, k=min(count, len(ids) - 1)))
    return [x for x in lives if x.persona_id not in held], [x for x in lives if x.persona_id in held]


def rows_hash(facts: Sequence[Fact], rows: Sequence[Row]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps([row.query, facts[row.fact].text, row.source]).encode())
    return digest.hexdigest()
