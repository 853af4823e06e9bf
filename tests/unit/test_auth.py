"""The pure parts of access control: credentials, key format and hash, scope checks."""

from __future__ import annotations

import hashlib
import re

import pytest

from dcpm.auth import ADMIN, Principal, credential, key_hash, new_key, require_admin, require_owner, require_user
from dcpm.errors import Forbidden, NotFound

ANA = Principal(user_id="ana", key_id="k1")


@pytest.mark.parametrize("header, expected", [
    ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Token abc", "abc"),
    ("Basic abc", None), ("Bearer", None), ("Bearer   ", None), ("", None), (None, None),
])
def test_a_credential_comes_from_a_bearer_or_token_header_only(header, expected):
    assert credential(header) == expected


def test_a_new_key_carries_its_prefix_and_32_random_bytes():
    prefix, key = new_key()
    assert re.fullmatch(r"dcpm_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", key) and key.split("_")[1] == prefix
    assert new_key()[1] != key


def test_a_key_is_kept_as_its_sha256():
    assert key_hash("dcpm_0a1b2c3d_secret") == hashlib.sha256(b"dcpm_0a1b2c3d_secret").hexdigest()


def test_the_admin_may_act_for_anyone():
    require_user(ADMIN, "bob")
    require_owner(ADMIN, "bob", "m1")
    require_admin(ADMIN)


def test_a_user_key_acts_for_its_own_user_only():
    require_user(ANA, "ana")
    require_owner(ANA, "ana", "m1")
    with pytest.raises(Forbidden):
        require_user(ANA, "bob")
    with pytest.raises(Forbidden):
        require_admin(ANA)


def test_another_users_record_is_not_found_rather_than_forbidden():
    with pytest.raises(NotFound, match="no memory with id m1"):
        require_owner(ANA, "bob", "m1")
    with pytest.raises(NotFound, match="no graph node with id n1"):
        require_owner(ANA, "bob", "n1", what="graph node")
