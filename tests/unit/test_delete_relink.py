"""Which links survive a delete: the pure planning step of dcpm.admin.delete."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from dcpm.admin.delete import USER_OWNED, Relink, relink
from dcpm.store.models import Base, Edge, Event, User


def at(month: int) -> datetime:
    return datetime(2025, month, 1, tzinfo=timezone.utc)


@dataclass
class Node:
    id: str
    supersedes_id: str | None
    superseded_by_id: str | None
    valid_from: datetime
    valid_to: datetime | None


def coffee_black_green() -> list[Node]:
    """Ana drinks coffee (Jan), then black tea (Mar), then green tea (Jun)."""
    return [Node("coffee", None, "black", at(1), at(3)), Node("black", "coffee", "green", at(3), at(6)),
            Node("green", "black", None, at(6), None)]


def test_deleting_a_middle_revision_links_its_neighbours_to_each_other():
    changes = relink(coffee_black_green(), {"black"})
    assert changes == [Relink("coffee", None, "green", at(6)), Relink("green", "coffee", None, None)]


def test_deleting_the_head_makes_the_previous_revision_current_again():
    assert relink(coffee_black_green(), {"green"}) == [Relink("black", "coffee", None, None)]


def test_deleting_the_root_leaves_its_successor_as_the_new_root():
    assert relink(coffee_black_green(), {"coffee"}) == [Relink("black", None, "green", at(6))]


def test_deleting_a_revision_with_its_predecessors_leaves_a_rootless_head():
    assert relink(coffee_black_green(), {"coffee", "black"}) == [Relink("green", None, None, None)]


def test_deleting_a_whole_chain_or_a_lone_item_relinks_nothing():
    assert relink(coffee_black_green(), {"coffee", "black", "green"}) == []
    assert relink([Node("bees", None, None, at(2), None)], {"bees"}) == []


def test_every_table_holding_user_data_is_covered_by_user_deletion():
    """A table added with a user_id column must be taught to delete_user."""
    with_user_column = {table.name for table in Base.metadata.tables.values() if "user_id" in table.columns}
    handled = {model.__tablename__ for model in USER_OWNED} | {Edge.__tablename__, Event.__tablename__}
    assert with_user_column == handled
    assert User.__tablename__ not in with_user_column  # the user row itself goes last, by id
