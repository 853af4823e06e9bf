"""Waiting slots for adds (dcpm.server.capacity): a free slot lets an add wait for its extraction,
none answers it at once; one user's flood of adds cannot take every slot from the others."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from dcpm.api.models import AddMemoryRequest
from dcpm.server.capacity import WaitingAdds


def add(user: str, **fields) -> AddMemoryRequest:
    return AddMemoryRequest(user_id=user, text="Ana keeps bees on her allotment", **fields)


def waits(slots: WaitingAdds, stack: ExitStack, user: str) -> bool:
    """Whether `user`'s next add may wait; its slot, if any, is held until `stack` closes."""
    return stack.enter_context(slots.admit(add(user))).wait


def test_one_user_flooding_leaves_waiting_slots_to_the_others():
    slots = WaitingAdds(size=8, per_user=2)
    with ExitStack() as held:
        assert [waits(slots, held, "ana") for _ in range(5)] == [True, True, False, False, False]
        assert waits(slots, held, "bob") and waits(slots, held, "bob") and not waits(slots, held, "bob")
        assert waits(slots, held, "cleo")


def test_the_daemon_wide_limit_still_holds_across_users():
    slots = WaitingAdds(size=2, per_user=2)
    with ExitStack() as held:
        assert waits(slots, held, "ana") and waits(slots, held, "bob")
        assert not waits(slots, held, "cleo")


def test_a_slot_is_given_back_when_its_add_ends_even_by_an_error():
    slots = WaitingAdds(size=4, per_user=1)
    with pytest.raises(RuntimeError):
        with slots.admit(add("ana")):
            raise RuntimeError("the LLM failed")
    with ExitStack() as held:
        assert waits(slots, held, "ana")
    with ExitStack() as held:
        assert waits(slots, held, "ana")  # the share is free again once the add ended


def test_adds_that_do_not_wait_take_no_slot():
    slots = WaitingAdds(size=1, per_user=1)
    with slots.admit(add("ana", wait=False)), slots.admit(add("ana", infer=False)), ExitStack() as held:
        assert waits(slots, held, "ana")


def test_no_slot_at_all_sends_every_add_to_the_background():
    with ExitStack() as held:
        assert not waits(WaitingAdds(size=0, per_user=1), held, "ana")
