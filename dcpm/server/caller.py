"""The caller of a request, as a FastAPI dependency; who it is and what it may reach is decided
in dcpm.auth. Routes take `caller: Caller` and make their one-line scope check with it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from dcpm.auth import Principal, authenticate


def current_principal(request: Request, authorization: Annotated[str | None, Header()] = None) -> Principal:
    service = request.app.state.service
    return authenticate(authorization, service.settings, service.db)


# FastAPI resolves a dependency once per request, so a router's `dependencies` and a route's
# `caller` parameter authenticate the request a single time.
Caller = Annotated[Principal, Depends(current_principal)]
