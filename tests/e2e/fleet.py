"""The story of the scale-out test: twenty users telling three daemons about themselves, some of
them moving house (each move supersedes where they lived), and the scripted LLM that extracts one
fact per turn and revises the user's home on a move. Also what the test reads back from the shared
PostgreSQL: raw inputs, items and their chains, consolidation runs, vector rows."""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import create_engine, text

from dcpm.testing.scripted_llm import one_fact_per_turn

NAMES = ["Ana", "Bruno", "Chiara", "Dev", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas", "Kemal", "Lucia",
         "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sami", "Tomas"]
CITIES = ["Porto", "Lisbon", "Braga", "Faro", "Coimbra", "Evora", "Aveiro"]
FACTS = ["{} keeps a sourdough starter called Bubbles", "{} is allergic to penicillin",
         "{} plays the cello on Sunday evenings", "{} prefers aisle seats on long flights",
         "{} is reading a biography of Ada Lovelace", "{} takes oat milk in coffee",
         "{} runs five kilometres before work", "{} has a daughter who turns seven in March",
         "{} collects vintage fountain pens", "{} is learning Japanese on weekday evenings",
         "{} volunteers at the food bank on Saturdays", "{} has a golden retriever named Biscuit",
         "{} works as a structural engineer", "{} dislikes coriander in salads",
         "{} watches Formula One races with a brother"]
TURNS_PER_USER = 20
HOME = re.compile(r" (lives in|moved to) ")


@dataclass(frozen=True)
class Turn:
    number: int
    user_id: str
    speaker: str
    text: str


def turns() -> list[Turn]:
    """len(NAMES) * TURNS_PER_USER turns, the users interleaved: every fourth turn of a user is
    about their home ("lives in" first, then "moved to"), the others are facts that stand alone."""
    story = []
    for k in range(TURNS_PER_USER):
        for u, name in enumerate(NAMES):
            if k % 4 == 0:
                city = CITIES[(u + k // 4) % len(CITIES)]
                said = f"{name} lives in {city}" if k == 0 else f"{name} moved to {city}"
            else:
                said = FACTS[k - 1 - k // 4].format(name)
            story.append(Turn(len(story), f"u{u:02d}", name, said))
    return story


def revise_home(items: list[tuple[str, list[tuple[str, str]]]]) -> dict:
    """Reconciliation: a new home supersedes the home the user had (when it is among the
    neighbours shown); every other fact is added."""
    decisions = []
    for n, (said, shown) in enumerate(items, 1):
        home = next((ref for ref, old in shown if HOME.search(old)), None) if HOME.search(said) else None
        decisions.append({"item": n, "op": "SUPERSEDE", "target": home} if home else {"item": n, "op": "ADD"})
    return {"decisions": decisions}


class Trap:
    """Extraction of one chosen turn stops until the test has killed the daemon doing it: that
    daemon dies holding the user's writer lease with the turn acknowledged and still pending."""

    def __init__(self, said: str):
        self.said = said
        self.caught = threading.Event()
        self.sprung = threading.Event()

    def extract(self, said_turns: list[str]) -> dict:
        if any(turn.endswith(self.said) for turn in said_turns) and not self.sprung.is_set():
            self.caught.set()
            self.sprung.wait(60)
        return one_fact_per_turn(said_turns)


class Store:
    """Read-only looks at the shared PostgreSQL, as an operator would take them with psql."""

    def __init__(self, url: str):
        self.engine = create_engine(url)

    def rows(self, query: str, **params: object) -> list[tuple]:
        with self.engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query), params)]

    def one(self, query: str, **params: object) -> object:
        return self.rows(query, **params)[0][0]

    def chains(self) -> dict[str, list[tuple]]:
        """chain_id -> its items as (id, supersedes_id, superseded_by_id, revision, text)."""
        found: dict[str, list[tuple]] = defaultdict(list)
        for chain_id, *item in self.rows("select chain_id, id, supersedes_id, superseded_by_id, revision, text "
                                         "from items"):
            found[chain_id].append(tuple(item))
        return found

    def close(self) -> None:
        self.engine.dispose()


def chain_faults(chain: list[tuple]) -> list[str]:
    """What makes a chain other than one line of revisions with exactly one current head."""
    by_id = {item[0]: item for item in chain}
    heads = [item for item in chain if item[2] is None]
    faults = [] if len(heads) == 1 else [f"{len(heads)} current heads"]
    for item_id, supersedes, superseded_by, _, _ in chain:
        if superseded_by is not None and by_id.get(superseded_by, (None, None))[1] != item_id:
            faults.append(f"{item_id} -> {superseded_by} is not linked back")
        if supersedes is not None and by_id.get(supersedes, (None, None, None))[2] != item_id:
            faults.append(f"{item_id} <- {supersedes} is not linked forward")
    predecessors = [item[1] for item in chain if item[1] is not None]
    if len(set(predecessors)) != len(predecessors):
        faults.append("a revision was superseded twice (the chain forks)")
    if sorted(item[3] for item in chain) != list(range(1, len(chain) + 1)):
        faults.append(f"revisions {sorted(item[3] for item in chain)}")
    return faults
