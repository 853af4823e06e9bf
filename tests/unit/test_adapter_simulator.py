"""The life simulator's LLM step with a fake client: validated answers, a retry on bad JSON."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class FakeLLM:
    """Answers with the queued texts in order and remembers every prompt."""

    def __init__(self, *answers: str):
        self.answers, self.prompts = list(answers), []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model, messages, **options):
        self.prompts.append(messages[0]["content"])
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=self.answers.pop(0)))])


def statement(n: int) -> dict:
    return {"kind": "a goal", "area": "travel", "fact": f"I want to walk the whole Camino de Santiago, stage {n}.",
            "later": ["Bought boots two sizes up.", "Knee brace or poles?", "Taking May off, all of it."],
            "direct": "How far along the Camino are you?"}


def test_a_bad_answer_is_asked_again_and_a_valid_one_becomes_a_simulated_life():
    simulator = load("simulate_lives", SCRIPTS / "simulate_lives.py")
    personas = load("personas", SCRIPTS / "lives" / "personas.py")
    persona = personas.sample_personas("friends", 1, seed=0)[0]
    llm = FakeLLM("not json at all", "```json\n" + json.dumps({"facts": [statement(n) for n in range(10)]}) + "\n```")
    life = simulator.simulate(llm, "any-model", persona, temperature=1.0)
    assert len(life.facts) == 10 and life.facts[0].later[0] == "Bought boots two sizes up."
    assert len(llm.prompts) == 2
    prompt = llm.prompts[0]
    assert f"a {persona.age}-year-old {persona.job} living in {persona.place}" in prompt
    assert all(kind in prompt for kind in persona.kinds) and "must NOT mention" in prompt
