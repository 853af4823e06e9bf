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
