"""Small readable scenarios shared by integration tests."""

from __future__ import annotations

from datetime import datetime, timezone

from dcpm.domain import Turn
from dcpm.store.items import NewItem, add_item, supersede


def at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 12, 0, tzinfo=timezone.utc)


ANA_TURNS = [
    Turn(text="I finally adopted a greyhound, her name is Pepper", speaker="Ana", timestamp=at(2025, 1, 5)),
    Turn(text="Work has been brutal, the audit at the bank runs until March", speaker="Ana", timestamp=at(2025, 1, 9)),
    Turn(text="I'm training for the Leeds half marathon in May", speaker="Ana", timestamp=at(2025, 2, 1)),
]
BOB_TURNS = [
    Turn(text="My cat Miso knocked my phone into the bath again", speaker="Bob", timestamp=at(2025, 1, 6)),
    Turn(text="I'm training for a triathlon in Kraków this summer", speaker="Bob", timestamp=at(2025, 2, 2)),
]


def ana_drinks_chain(service, user_id: str = "ana"):
    """Ana drinks coffee (Jan), switches to black tea (Mar), then to green tea (Jun)."""
    from dcpm.write.raw import touch_user

    with service.db.session() as session:
        touch_user(session, user_id)
        coffee = add_item(session, user_id, NewItem("identity", "Ana drinks two espressos every morning",
                                                    valid_from=at(2025, 1, 10), topic="food and drink"))
        black = supersede(session, coffee, NewItem("identity", "Ana has switched from coffee to black tea",
                                                   valid_from=at(2025, 3, 1)))
        green = supersede(session, black, NewItem("identity", "Ana now only drinks green tea, no caffeine after noon",
                                                  valid_from=at(2025, 6, 1)))
        items = [coffee, black, green]
    service.writer.index_rows(items=items)
    return items
