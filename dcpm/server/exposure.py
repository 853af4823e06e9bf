"""Who can reach a server dcpm starts: an address reachable from the network is served only with
a credential, or when the operator says so (`allow_open_network`). `dcpm serve` and
`dcpm mcp --transport http` ask here before they open anything."""

from __future__ import annotations

import ipaddress

from dcpm.auth import access_control_on
from dcpm.config import Settings
from dcpm.store.db import Database

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """Only this machine can reach `host`: `localhost` or a loopback address. Any other name may
    resolve to a network address, so it counts as one."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_refusal(settings: Settings, host: str, db: Database) -> str | None:
    """Why serving the daemon on `host` is refused, or None: a non-loopback address with no admin
    token and access control never switched on would make every network peer the admin."""
    if is_loopback(host) or settings.allow_open_network or access_control_on(settings, db):
        return None
    return (f"refusing to serve {host} with no credential: every machine that reaches it would be the admin. "
            "Set an admin token (DCPM_API_TOKEN) first, or serve 127.0.0.1, or pass --allow-open-network "
            "(DCPM_ALLOW_OPEN_NETWORK=true) if the network is yours alone.")


def mcp_http_refusal(settings: Settings, host: str, user: str | None) -> str | None:
    """Why `dcpm mcp --transport http` is refused, or None. That server has no authentication of
    its own and acts with the CLI's credential, so it must act for one configured user (a
    client-chosen `_meta` user would let any caller reach every user), and on loopback only."""
    if not user:
        return ("--transport http needs --user (DCPM_MCP_USER): the HTTP server checks no credential, so it "
                "acts for one configured user; request metadata naming the user is taken on stdio only")
    if not is_loopback(host) and not settings.allow_open_network:
        return (f"refusing to serve MCP on {host}: it has no authentication, so every machine that reaches it "
                f"would act as {user}. Serve 127.0.0.1, or pass --allow-open-network if the network is yours alone.")
    return None
