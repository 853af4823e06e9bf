from datetime import datetime, timezone

from dcpm.api.models import ChainLink, SearchHit
from dcpm.read.context_block import estimate_tokens, render_context, render_line

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


def test_old_revision_reads_as_replaced_and_never_as_its_own_past():
    coffee = ChainLink(id="coffee", text="I drink two espressos every morning", revision=1, valid_from=WHEN,
                       valid_to=datetime(2025, 6, 1, tzinfo=timezone.utc), current=False)
    green = ChainLink(id="green", text="I only drink green tea now", revision=2,
                      valid_from=datetime(2025, 6, 1, tzinfo=timezone.utc), valid_to=None, current=True)
    line = render_line(hit(coffee.text, kind="identity", chain=[coffee, green], current=green).model_copy(
        update={"id": "coffee"}))
    assert line == ("- [2025-03-02] (identity) I drink two espressos every morning (replaced 2025-06-01) "
                    "-> now: I only drink green tea now")


def test_current_revision_lists_only_the_beliefs_before_it():
    coffee = ChainLink(id="coffee", text="drinks coffee", revision=1, valid_from=WHEN, valid_to=WHEN, current=False)
    black = ChainLink(id="black", text="drinks black tea", revision=2, valid_from=WHEN, valid_to=WHEN, current=False)
    green = ChainLink(id="green", text="drinks green tea", revision=3, valid_from=WHEN, valid_to=None, current=True)
    line = render_line(hit("drinks green tea", kind="fact", chain=[coffee, black, green]).model_copy(
        update={"id": "green"}))
    assert line.endswith("(fact) drinks green tea (earlier: drinks coffee; drinks black tea)")


def test_context_without_hits_is_empty():
    assert render_context([], budget_tokens=1000) == ""
