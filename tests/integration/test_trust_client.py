"""The Python client (which the CLI and the MCP server use against a daemon) cannot be steered by
the text of an id, and every error the daemon sends comes back as the same error class."""

from __future__ import annotations

import httpx
import pytest

from dcpm.api.client import Client
from dcpm.domain import Turn
from dcpm.errors import DcpmError, Invalid, NotFound
from dcpm.server.app import create_app

from .scenarios import ana_drinks_chain
from .served import served


def test_an_id_cannot_smuggle_a_chain_delete_through_the_client(service):
    coffee, black, green = ana_drinks_chain(service)
    with served(create_app(service)) as url, Client(url) as client:
        with pytest.raises(DcpmError):  # the model wrote the id; it stays one path segment
            client.delete_memory(f"{green.id}?chain=true")
        with pytest.raises(DcpmError):
            client.get(f"{green.id}/history")
        assert [link.id for link in client.get(green.id).chain] == [coffee.id, black.id, green.id]


@pytest.mark.parametrize("session", ["..", "."])
def test_a_dot_session_id_cannot_turn_a_session_delete_into_a_user_delete(service, session):
    """HTTP clients resolve dot segments: /v1/users/ana/sessions/.. is sent as /v1/users/ana, so
    `dcpm delete ana --session ..` used to delete everything of ana instead of one session."""
    coffee, black, green = ana_drinks_chain(service)
    with served(create_app(service)) as url, Client(url) as client:
        with pytest.raises(Invalid, match="not an id"):
            client.delete_session("ana", session)
        assert client.get(green.id).text == green.text


def test_a_session_whose_id_holds_a_slash_can_be_deleted_through_the_daemon(service):
    """Servers decode %2F before routing, so DELETE /v1/users/ana/sessions/trip%2F2024 matched no
    route (404 'Not Found') and the client refused the id: only its whole user could go."""
    service.import_turns("ana", [Turn(text="We booked the ferry to Skye", session_id="trip/2024"),
                                 Turn(text="I keep bees on my allotment", session_id="home")])
    with served(create_app(service)) as url, Client(url) as client:
        deleted = client.delete_session("ana", "trip/2024")
        assert len(deleted.raw_deleted) == 1
        assert [m.text for m in client.list_memories("ana", kind="raw").items] == ["I keep bees on my allotment"]
        assert httpx.delete(f"{url}/v1/users/ana/sessions/home%2F..").status_code == 404  # one session, no route


def test_a_daemons_refusal_comes_back_as_the_error_it_was(service):
    with served(create_app(service)) as url, Client(url) as client:
        with pytest.raises(NotFound) as raised:
            client.get("00000000-0000-4000-8000-000000000000")
    assert raised.value.exit_code == NotFound.exit_code


def every_error(root: type[DcpmError] = DcpmError) -> list[type[DcpmError]]:
    return [cls for sub in root.__subclasses__() for cls in (sub, *every_error(sub))]


@pytest.mark.parametrize("error", every_error(), ids=lambda cls: cls.__name__)
def test_every_status_the_daemon_sends_maps_back_to_its_error(error):
    from dcpm.api.client import _ERRORS

    mapped = _ERRORS[error.http_status]
    assert mapped.http_status == error.http_status and mapped.exit_code == error.exit_code, (
        f"{error.__name__} ({error.http_status}) comes back as {mapped.__name__}")
