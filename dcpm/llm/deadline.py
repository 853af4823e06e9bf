"""A deadline on a whole LLM answer (`llm_timeout`). The HTTP client's timeout bounds each read of
the socket, not the answer: an endpoint that trickles a byte now and then (a stuck server, a proxy
keeping the connection alive) would hold the writer, and the user's later inputs behind it, for
as long as it went on. Past the deadline the body's next read fails as a read timeout, which the
`openai` client reports as APITimeoutError, retried like any other timeout."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

_DEADLINE = "dcpm_deadline"


def event_hooks(seconds: float) -> dict[str, list[Callable[[Any], None]]]:
    """Hooks for the `openai` client's HTTP client: the deadline starts when a request is sent."""

    def sent(request: Any) -> None:
        request.extensions[_DEADLINE] = time.monotonic() + seconds

    def answered(response: Any) -> None:
        # The HTTP library is the one `openai` uses (httpx, or a successor with its API): found from
        # the response rather than imported, so the stream and the error are that library's own.
        http = sys.modules[type(response).__module__.split(".")[0]]
        deadline = response.request.extensions.get(_DEADLINE, time.monotonic() + seconds)
        response.stream = _until(http, response.stream, deadline, response.request)

    return {"request": [sent], "response": [answered]}


def _until(http: Any, stream: Any, deadline: float, request: Any) -> Any:
    class Until(http.SyncByteStream):
        def __iter__(self):  # type: ignore[no-untyped-def]
            for chunk in stream:
                if time.monotonic() > deadline:
                    raise http.ReadTimeout("the answer was still arriving at the deadline", request=request)
                yield chunk

        def close(self) -> None:
            stream.close()

    return Until()
