from datetime import datetime, timezone

from dcpm.api.models import ChainLink, SearchHit
from dcpm.read.context_block import estimate_tokens, render_context

WHEN = datetime(2025, 3, 2, tzinfo=timezone.utc)


def hit(text: str, **extra) -> SearchHit:
    return SearchHit(id=text[:8], kind=extra.pop("kind", "raw"), text=text, score=1.0, dense_score=1.0,
                     sparse_score=0.0, timestamp=WHEN, created_at=WHEN, **extra)


def test_context_lists_hits_with_date_and_speaker():
    block = render_context([hit("I moved to Leeds", speaker="Ana")], budget_tokens=200)
    assert "[2025-03-02] Ana: I moved to Leeds" in block


def test_context_stops_at_the_token_budget():
    hits = [hit(f"memory number {n} " + "x" * 80) for n in range(20)]
    block = render_context(hits, budget_tokens=100)
    assert estimate_tokens(block) <= 100
    assert "memory number 0" in block and "memory number 19" not in block


def test_zero_budget_renders_nothing():
    assert render_context([hit("anything")], budget_tokens=0) == ""


def test_superseded_fact_shows_what_is_believed_now():
    old = ChainLink(id="a", text="drinks coffee", revision=1, valid_from=WHEN, valid_to=WHEN, current=False)
    new = ChainLink(id="b", text="drinks green tea", revision=2, valid_from=WHEN, valid_to=None, current=True)
    block = render_context([hit("drinks coffee", kind="fact", chain=[old, new], current=new)], budget_tokens=200)
    assert "now: drinks green tea" in block
