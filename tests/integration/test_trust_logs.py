"""Memory text is personal data: a store error (which reaches logs and run records) names what
failed, never the values that were being written."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from dcpm.store.models import RawInput
from dcpm.write.raw import touch_user

SECRET = "my locker code is kumquat-4471"


def test_a_failed_write_does_not_carry_the_memory_text_into_its_error(service):
    with service.db.session() as session:
        touch_user(session, "ana")
    with pytest.raises(IntegrityError) as raised:
        with service.db.session() as session:
            for _ in range(2):  # the same primary key twice
                session.add(RawInput(id="00000000-0000-4000-8000-000000000001", user_id="ana", request_id="r",
                                     position=0, role="user", text=SECRET, status="raw", meta={}))
                session.flush()
    assert "kumquat" not in str(raised.value)
