from dataclasses import dataclass
from datetime import datetime, timezone

from dcpm.store.chains import believed_at, walk_chain


@dataclass
class Node:
    id: str
    supersedes_id: str | None
    superseded_by_id: str | None
    valid_from: datetime
    valid_to: datetime | None


def day(d: int) -> datetime:
    return datetime(2025, 1, d, tzinfo=timezone.utc)


def ana_coffee_to_green_tea():
    """Ana drinks coffee, then black tea, then green tea."""
    coffee = Node("coffee", None, "black", day(1), day(10))
    black = Node("black", "coffee", "green", day(10), day(20))
    green = Node("green", "black", None, day(20), None)
    return coffee, black, green


def test_walk_chain_orders_oldest_to_newest_whatever_the_input_order():
    coffee, black, green = ana_coffee_to_green_tea()
    assert [n.id for n in walk_chain([green, coffee, black])] == ["coffee", "black", "green"]


def test_believed_now_is_the_head():
    chain = walk_chain(list(ana_coffee_to_green_tea()))
    assert believed_at(chain, None).id == "green"


def test_believed_at_a_past_date_is_the_revision_holding_then():
    chain = walk_chain(list(ana_coffee_to_green_tea()))
    assert believed_at(chain, day(5)).id == "coffee"
    assert believed_at(chain, day(10)).id == "black"
    assert believed_at(chain, day(25)).id == "green"


def test_before_the_first_revision_nothing_was_believed():
    chain = walk_chain(list(ana_coffee_to_green_tea()))
    assert believed_at(chain, datetime(2024, 1, 1, tzinfo=timezone.utc)) is None


def test_broken_pointer_still_shows_every_node():
    coffee, black, green = ana_coffee_to_green_tea()
    black.superseded_by_id = "missing"
    ordered = walk_chain([coffee, black, green])
    assert {n.id for n in ordered} == {"coffee", "black", "green"}
    assert [n.id for n in ordered][:2] == ["coffee", "black"]
