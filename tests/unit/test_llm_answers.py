import json

import pytest

from dcpm.llm.client import _BadAnswer, parse_answer
from dcpm.llm.prompts.extract import ExtractionAnswer


def test_answer_in_a_code_fence_is_read():
    answer = parse_answer('```json\n{"items": [{"kind": "fact", "text": "Ana keeps bees"}]}\n```', ExtractionAnswer)
    assert answer.items[0].text == "Ana keeps bees"


def test_prose_around_the_json_is_ignored():
    assert parse_answer('Sure! {"items": []} Hope that helps.', ExtractionAnswer).items == []


@pytest.mark.parametrize("content", ["{'items': [oops", "no json here", '{"items": [{"kind": "planet", "text": "x"}]}'])
def test_broken_or_invalid_answers_are_retryable(content):
    with pytest.raises(_BadAnswer):
        parse_answer(content, ExtractionAnswer)


def test_an_answer_with_thousands_of_items_keeps_the_first_hundred():
    """A model run wild (or steered by the turn) cannot turn one message into thousands of memories."""
    from dcpm.llm.prompts.extract import MAX_EXTRACTED_ITEMS

    items = [{"kind": "fact", "text": f"Ana said thing number {n}"} for n in range(3000)]
    answer = parse_answer(json.dumps({"items": items}), ExtractionAnswer)
    assert len(answer.items) == MAX_EXTRACTED_ITEMS == 100
    assert answer.items[-1].text == "Ana said thing number 99"
