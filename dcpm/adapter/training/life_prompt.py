"""The life simulator's prompt (Madeleine appendix A) and the answer it must return.

One call simulates one persona in three steps: about ten specific earlier statements over
the sampled life areas and statement kinds; three later messages each that must not mention
or hint at the earlier topic; one direct question each. "friends" follows the paper's v3
prompt (a year of chat between friends), "assistant" its v2 prompt (concrete facts, then
requests to an assistant that should answer differently because of them). Neither copies the
wording or examples of any benchmark.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

FRIENDS = """You are simulating one real person's life over about a year, as it comes up in casual chats with a close friend. Persona: a {age}-year-old {job} living in {place}.
(1) Write {n} different things this person told the friend early on, each as one or two casual first-person sentences. Every statement must be SPECIFIC (name the actual goal, plan, event, situation, person, feeling or principle and why it matters to them). Spread them over these life areas: {areas}. Use these kinds (one each, in any order): {kinds}.
(2) For each statement, write 3 things the person says to the friend weeks or months later, in new situations, that are part of how their life actually unfolded from it: progress, a setback, giving up, a change of heart, a consequence, a new choice it shaped, or a dilemma it creates. Make the 3 developments differ from each other.
HARD RULES for the later messages: The person does not refer back: they must NOT mention, hint at or allude to the earlier statement, its topic, its key objects, people, places or feelings. No "remember when", "like I said", "because of that", "given my ...". Share no content words with the earlier statement; no paraphrase. A stranger reading the later message must see no link at all; a friend who remembers the earlier statement would immediately see how it explains or bears on the later one, and would answer differently because of it. Each must read as a normal standalone chat message, and for each later message only this one earlier statement of the person should matter.
Good example of the spirit (do not reuse): earlier "I'm putting every spare dollar toward a used sailboat so I can sail the coast next summer." -> later "Sold my car this morning, the bus is honestly fine."
(3) For each statement, also write one short question the friend might ask that plainly refers to it.
Vary tone, length and specificity. Avoid cliches and avoid repeating the same kind of development.
Return JSON only: {{"facts": [{{"kind": ..., "area": ..., "fact": ..., "later": [..., ..., ...], "direct": ...}}, ...]}} where kind and area are copied from the lists above."""

ASSISTANT = """You are simulating one real person who uses an AI assistant over about a year. Persona: a {age}-year-old {job} living in {place}.
(1) Write {n} different personal facts this person told the assistant early on, each as one or two first-person sentences. Every fact must be SPECIFIC: name the actual condition, medication, diet, practice, rule, obligation, possession, place, event, goal or limitation, with the detail that matters. Spread them over these life areas: {areas}. Use these kinds (one each, in any order): {kinds}.
(2) For each fact, write 3 messages the person sends the assistant weeks or months later: requests, plans, purchases, invitations, updates or complaints in which a knowledgeable assistant who remembers the fact should change its answer because of real-world consequences. Make the 3 messages differ from each other.
HARD RULES for the later messages: They must NOT mention, hint at or allude to the earlier fact, its topic, its key objects, people, places or feelings. No "remember when", "like I said", "as you know", "given my ...". Share no content words with the earlier fact; no paraphrase. A stranger reading the later message must see no link at all; an assistant that remembers the fact would immediately see why it matters and would answer differently. Each must read as a normal standalone message, and for each later message only this one earlier fact of the person should matter.
Good example of the spirit (do not reuse): earlier "I'm on a blood thinner since my valve surgery." -> later "Looking for tips to get into mountain biking this spring."
(3) For each fact, also write one short question the person might ask the assistant that plainly refers to it.
Vary tone, length and specificity. Avoid cliches and avoid repeating the same kind of request.
Return JSON only: {{"facts": [{{"kind": ..., "area": ..., "fact": ..., "later": [..., ..., ...], "direct": ...}}, ...]}} where kind and area are copied from the lists above."""

TEMPLATES = {"friends": FRIENDS, "assistant": ASSISTANT}


class SimulatedStatement(BaseModel):
    kind: str
    area: str
    fact: str = Field(min_length=10)
    later: list[str] = Field(min_length=3)
    direct: str = Field(min_length=5)


class SimulatedLife(BaseModel):
    facts: list[SimulatedStatement] = Field(min_length=5)


def render(source: str, age: int, job: str, place: str, areas: list[str], kinds: list[str]) -> str:
    return TEMPLATES[source].format(age=age, job=job, place=place, n=len(kinds), areas=", ".join(areas),
                                    kinds="; ".join(kinds))
