"""Fixed persona lists for the life simulator (Madeleine, appendix A).

Each simulated life is seeded by an age, a job, a place, the life areas its
statements must cover and the statement kinds to use, all sampled from these
lists with a fixed seed so a corpus can be regenerated exactly.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

JOBS = [
    "ICU nurse", "long-haul truck driver", "primary school teacher", "dairy farmer",
    "software tester", "hotel night manager", "marine biologist", "bus mechanic",
    "wedding photographer", "tax accountant", "line cook", "retired postal worker",
    "physiotherapist", "graduate student in linguistics", "bartender", "real-estate agent",
    "electrician", "public defender", "landscape gardener", "air-traffic controller",
    "pharmacist", "stay-at-home parent", "museum conservator", "warehouse picker",
    "freelance translator", "veterinary technician", "high-school football coach",
    "data analyst at an insurer", "ferry deckhand", "church organist", "dental hygienist",
    "civil engineer", "barista and part-time musician", "social worker", "tattoo artist",
    "retired army sergeant", "UX designer", "plumber", "paramedic", "librarian",
    "small bakery owner", "call-centre supervisor", "wildland firefighter", "orthodontist",
    "delivery cyclist", "PhD student in chemistry", "airline pilot", "yoga instructor",
    "city council clerk", "carpenter", "hospice chaplain", "video game producer",
    "school bus driver", "sommelier", "construction site manager", "speech therapist",
    "journalist at a local paper", "retired maths professor", "dog groomer", "midwife",
]

PLACES = [
    "Leeds", "a village outside Cork", "Minneapolis", "Brisbane", "Lyon", "Nairobi",
    "suburban Phoenix", "Glasgow", "Montreal", "a small town in Vermont", "Osaka",
    "Auckland", "Rotterdam", "Lagos", "Austin", "a coastal town in Maine", "Manchester",
    "Kraków", "Cape Town", "Halifax", "Denver", "Porto", "Singapore", "rural Iowa",
    "Bristol", "Tallinn", "Vancouver", "New Orleans", "Dublin", "a ski town in Colorado",
    "Adelaide", "Seoul", "Pittsburgh", "Bergen", "Mexico City", "a farm in Saskatchewan",
    "Brighton", "Milwaukee", "Valencia", "Tucson",
]

LIFE_AREAS = [
    "health", "work and career", "money", "family", "friendships", "romance",
    "home and housing", "food and drink", "sport and fitness", "travel", "learning",
    "hobbies and making things", "pets", "faith and values", "community and neighbours",
    "mental wellbeing", "commuting and transport", "technology", "parenting", "ageing",
]

# v2-style source: concrete facts a person tells an assistant.
ASSISTANT_FACT_KINDS = [
    "a named medical condition", "a medication they take", "a diet they follow",
    "an allergy or intolerance", "a daily practice", "a personal rule", "an obligation",
    "a possession", "a place they live or go to", "an upcoming event", "a goal",
    "a physical limitation", "a fear or phobia", "a debt or money constraint",
    "a caring responsibility", "a religious or ethical commitment", "a work schedule",
    "a vehicle or its quirk", "a pet and its needs", "a recent loss", "a legal or visa situation",
    "a sensory sensitivity",
]

# v3-style source: a year of chat between two friends.
FRIEND_STATEMENT_KINDS = [
    "a goal", "a plan", "an experience", "a value or principle", "a worry",
    "a new habit", "a relationship situation", "a decision they are weighing",
    "a project", "a promise they made", "a hope", "a change they want",
]

# "passing" source (round 3): a fact said in passing inside a longer, chattier message (texting
# between friends, rambling messages to an assistant, notes to self), and what it later bears on.
PASSING_KINDS = [
    "a cause and its consequence", "a state of health", "a mood or rough stretch",
    "a money or housing circumstance", "a goal", "a plan with a date", "a value or preference",
    "a constraint on their time", "a relationship situation", "a routine", "a body limit or injury",
    "a commitment to someone",
]

AGES = list(range(19, 82))


@dataclass(frozen=True)
class Persona:
    persona_id: str
    source: str
    age: int
    job: str
    place: str
    areas: list[str]
    kinds: list[str]


def sample_personas(source: str, count: int, seed: int, statements: int = 10) -> list[Persona]:
    """Sample `count` personas for one source; the same seed always gives the same list."""
    rng = random.Random(f"{source}:{seed}")
    kinds_pool = {"assistant": ASSISTANT_FACT_KINDS, "passing": PASSING_KINDS}.get(source, FRIEND_STATEMENT_KINDS)
    personas = []
    for number in range(1, count + 1):
        kinds = rng.sample(kinds_pool, k=min(statements, len(kinds_pool)))
        personas.append(Persona(
            persona_id=f"{source}-{number:03d}",
            source=source,
            age=rng.choice(AGES),
            job=rng.choice(JOBS),
            place=rng.choice(PLACES),
            areas=rng.sample(LIFE_AREAS, k=5),
            kinds=kinds,
        ))
    return personas


if __name__ == "__main__":
    import json
    import sys

    source, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for persona in sample_personas(source, count, seed):
        print(json.dumps(asdict(persona)))
