"""The caller of a request, as a FastAPI dependency; who it is and what it may reach is decided
in dcpm.auth. Routes take `caller: Caller` and make their one-line scope check with it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from dcpm.auth import Principal, authenticate, credential, key_hash
from dcpm.errors import Unauthorized


def principal_of(request: Request, header: str | None) -> Principal:
    """The principal `header` proves, unless the request's address is locked out for sending too
    many wrong credentials and this one never succeeded (dcpm.server.lockout): then
    TooManyRequests, the credential unchecked. A missing credential is no guess and is not counted."""
    service, lockout = request.app.state.service, request.app.state.lockout
    address = request.client.host if request.client else ""
    value = credential(header)
    proof = key_hash(value) if value is not None else None
    lockout.check(address, proof)
    try:
        principal = authenticate(header, service.settings, service.db)
    except Unauthorized:
        if proof is not None:
            lockout.failed(address)
        raise
    if proof is not None:
        lockout.succeeded(proof)
    return principal


def current_principal(request: Request, authorization: Annotated[str | None, Header()] = None) -> Principal:
    return principal_of(request, authorization)


# FastAPI resolves a dependency once per request, so a router's `dependencies` and a route's
# `caller` parameter authenticate the request a single time.
Caller = Annotated[Principal, Depends(current_principal)]
