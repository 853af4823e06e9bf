"""Access control: who a request comes from, and what they may reach.

Two kinds of credential, sent as `Authorization: Bearer <credential>` (or `Token <credential>`,
what Mem0 clients send):
- the admin token (`api_token` in settings) may do everything;
- an API key (`dcpm keys create --user U`) acts for its one user: that user's memories and
  nothing else, no admin operation. An assistant back end holds a key per user it serves.

With no admin token, and access control never switched on, the daemon is open, as suits one
operator on one machine. The first API key switches access control on for good: a flag of its
own in the store (`AccessControl`), not derived from the key rows, so neither revoking the last
key nor deleting the last key holder's user (which deletes that user's keys) opens the daemon
again. Only the operator turns it off, on the store itself (`dcpm keys reset-access`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from dcpm.api.models import ApiKeyOut, NewApiKey
from dcpm.config import Settings
from dcpm.domain import check_user_id
from dcpm.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    StorageFull,
    Unauthorized,
)
from dcpm.store.db import Database
from dcpm.store.models import AccessControl, ApiKey, utcnow
from dcpm.stored_values import check_text

log = logging.getLogger("dcpm.auth")

KEY_SCHEME = "dcpm"  # keys read `dcpm_<prefix>_<secret>`
PREFIX_HEX_CHARS = 8
SECRET_BYTES = 32
SCHEMES = ("bearer", "token")
LAST_USED_RESOLUTION = timedelta(minutes=1)  # a key's last use is written at most this often
ACCESS_CONTROL_ROW = 1


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the admin, or an API key scoped to one user."""

    user_id: str | None = None  # None: the admin, who may act for every user
    key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.user_id is None


ADMIN = Principal()


def key_hash(key: str) -> str:
    """Hex SHA-256 of a whole key. A fast unsalted hash is enough here, unlike for passwords: a key
    holds 32 random bytes from `secrets`, so no amount of guessing finds one from its hash, and
    a plain digest lets each request find its key with one indexed lookup."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> tuple[str, str]:
    """A fresh key and its prefix (the part shown to humans): `dcpm_<prefix>_<secret>`."""
    prefix = secrets.token_hex(PREFIX_HEX_CHARS // 2)
    return prefix, f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"


def credential(header: str | None) -> str | None:
    """The credential of an Authorization header (`Bearer X` or `Token X`); None otherwise."""
    scheme, _, value = (header or "").partition(" ")
    value = value.strip()
    return value if scheme.lower() in SCHEMES and value else None


def authenticate(header: str | None, settings: Settings, db: Database) -> Principal:
    """The principal an Authorization header proves; Unauthorized when access control is on
    (see `access_control_on`) and the header proves nothing."""
    token = settings.api_token.get_secret_value()
    if not access_control_on(settings, db):
        return ADMIN
    value = credential(header)
    if value is None:
        raise Unauthorized("missing credential: send 'Authorization: Bearer <admin token or API key>'")
    if token and secrets.compare_digest(value.encode("utf-8"), token.encode("utf-8")):
        return ADMIN
    # Looking the key up by its hash leaks nothing by timing: a caller cannot steer a SHA-256.
    with db.session() as session:
        key = session.scalar(select(ApiKey).where(ApiKey.hash == key_hash(value)))
    if key is None:
        raise Unauthorized("wrong admin token or unknown API key")
    if key.revoked_at is not None:
        log.warning("refused revoked API key %s (user %s)", key.prefix, key.user_id)
        raise Unauthorized(f"API key {key.prefix} has been revoked")
    _note_use(db, key)
    return Principal(user_id=key.user_id, key_id=key.id)


def require_user(principal: Principal, user_id: str) -> None:
    """The caller may act for `user_id`: the admin may act for anyone, a key for its user only."""
    if not principal.is_admin and principal.user_id != user_id:
        raise Forbidden(f"this API key acts for user {principal.user_id!r} only, not {user_id!r}")


def require_owner(principal: Principal, owner: str, record_id: str, what: str = "memory") -> None:
    """The caller may reach a record (a memory, a graph node) owned by `owner`. Another user's
    record reads exactly like a missing one, so a key cannot learn which ids exist for others."""
    if not principal.is_admin and principal.user_id != owner:
        raise NotFound(f"no {what} with id {record_id}")


def require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("this needs the admin token; an API key acts for its one user only")


def access_control_on(settings: Settings, db: Database) -> bool:
    """An admin token is set, or access control was switched on in the store (by the first API
    key), or a valid key exists. A store that cannot answer fails closed (the error propagates)."""
    if settings.api_token.get_secret_value():
        return True
    with db.session() as session:
        if session.get(AccessControl, ACCESS_CONTROL_ROW) is not None:
            return True
        return session.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)) is not None


def reset_access(db: Database) -> None:
    """Switch access control off again (with no admin token set, the daemon then answers every
    caller as the admin): an operator's decision, taken on the store itself, never over HTTP.
    Refused while a valid key exists, since its holder relies on the daemon being closed."""
    with db.session() as session:
        live = session.scalar(select(func.count()).select_from(ApiKey).where(ApiKey.revoked_at.is_(None)))
        if live:
            raise Conflict(f"{live} API key(s) are still valid: revoke them first (dcpm keys list, dcpm keys revoke)")
        session.execute(delete(AccessControl))
    log.warning("access control was switched off by the operator")


def _note_use(db: Database, key: ApiKey) -> None:
    """Record when a key was last used; a store that cannot take the write must not refuse the
    request, so a failure is logged and the request goes on."""
    now = utcnow()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    try:
        with db.session() as session:
            session.execute(update(ApiKey).where(ApiKey.id == key.id).values(last_used_at=now))
    except (StorageFull, OperationalError) as exc:
        log.warning("could not record the use of API key %s: %s", key.prefix, exc)


class KeyStore:
    """The API keys in the relational store: what `dcpm keys` and /v1/admin/keys manage. Only a
    key's hash is stored; `create_key` returns the plaintext this once."""

    def __init__(self, db: Database):
        self.db = db

    def create_key(self, user_id: str, label: str | None = None) -> NewApiKey:
        check_user_id(user_id)
        if label is not None and len(label) > 200:
            raise Invalid("label: at most 200 characters")
        if label is not None:
            check_text(label, "the label")  # PostgreSQL stores no NUL
        for _ in range(3):
            prefix, key = new_key()
            try:
                with self.db.session() as session:
                    row = ApiKey(prefix=prefix, hash=key_hash(key), user_id=user_id, label=label,
                                 created_at=utcnow())
                    session.add(row)
                    if session.get(AccessControl, ACCESS_CONTROL_ROW) is None:  # in the key's transaction
                        session.add(AccessControl(id=ACCESS_CONTROL_ROW, reason=f"first API key {prefix}"))
            except IntegrityError:  # a prefix collision, or a first key made at the same moment: draw again
                continue
            log.info("created API key %s for user %s", prefix, user_id)
            return NewApiKey(**key_out(row).model_dump(), key=key)
        raise Invalid("could not draw a unique key prefix; try again")

    def api_keys(self, user_id: str | None = None) -> list[ApiKeyOut]:
        """Every key (or one user's), oldest first, revoked ones included."""
        query = select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)
        if user_id is not None:
            query = query.where(ApiKey.user_id == user_id)
        with self.db.session() as session:
            return [key_out(row) for row in session.scalars(query)]

    def revoke_key(self, key_ref: str) -> ApiKeyOut:
        """Revoke a key named by its id or its prefix (`3f9a0c1e` or `dcpm_3f9a0c1e...`); revoking
        a revoked key changes nothing."""
        prefix = key_ref.removeprefix(f"{KEY_SCHEME}_").split("_", 1)[0]
        with self.db.session() as session:
            row = session.scalar(select(ApiKey).where(or_(ApiKey.id == key_ref, ApiKey.prefix == prefix)))
            if row is None:
                raise NotFound(f"no API key with id or prefix {key_ref!r}")
            if row.revoked_at is None:
                row.revoked_at = utcnow()
                log.info("revoked API key %s of user %s", row.prefix, row.user_id)
            return key_out(row)


def key_out(row: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(id=row.id, prefix=row.prefix, user_id=row.user_id, label=row.label, created_at=row.created_at,
                     last_used_at=row.last_used_at, revoked_at=row.revoked_at)
