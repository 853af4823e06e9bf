"""Structured calls to an OpenAI-compatible chat endpoint.

The answer's JSON schema comes from a Pydantic model. Servers differ in what they accept as
`response_format`: OpenAI and vLLM take `json_schema`; llama.cpp's server rejects it ("Input
should be 'text' or 'json_object'") but takes `json_object` with a schema; some take neither.
The client starts at the strictest mode and steps down once a server refuses it, remembering the
mode that worked. Timeouts, 5xx, rate limits and invalid answers are retried with backoff.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from dcpm.config import Settings
from dcpm.errors import Unavailable
from dcpm.llm.answers import decoding_schema
from dcpm.llm.deadline import event_hooks
from dcpm.metrics import LLM_CALLS, LLM_TOKENS

log = logging.getLogger("dcpm.llm")
Answer = TypeVar("Answer", bound=BaseModel)
MODES = ("json_schema", "json_object", "prompt")
_REFUSED_FORMAT = re.compile(r"json_schema|json_object|response_format|Input should be", re.IGNORECASE)
_ERROR_CODE = re.compile(r"[\w.\-]{1,64}")  # e.g. context_length_exceeded
MAX_WAIT_SECONDS = 30  # the longest pause between two tries of one call


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict


class _PlannedCall(BaseModel):
    tool: str
    arguments: dict


class _ToolPlan(BaseModel):
    calls: list[_PlannedCall] = []


class LLMFailure(Unavailable):
    """The LLM gave no usable answer after every retry; the caller keeps its input pending.
    The message names what went wrong, never the server's error text (it may quote the prompt)."""


class LLMUnreachable(LLMFailure):
    """No connection to the endpoint at all: no request's fault, and none is given up for it."""


class LLMRateLimited(LLMFailure):
    """The endpoint refuses every request for now (HTTP 429): no request's fault either."""


class _BadAnswer(Exception):
    pass


class _FormatRefused(Exception):
    pass


@dataclass
class Usage:
    """LLM calls and tokens spent for one request (shown in the response and in metrics)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMClient:
    def __init__(self, settings: Settings):
        import openai  # here, not at the top: importing openai takes most of a second, and commands
        # that only read the store (dcpm users, dcpm show) import this module without calling an LLM

        self.settings = settings
        self.model = settings.llm_model
        self._client = openai.OpenAI(base_url=settings.llm_base_url,
                                     api_key=settings.llm_api_key.get_secret_value() or "not-needed",
                                     timeout=settings.llm_timeout, max_retries=0,
                                     http_client=openai.DefaultHttpxClient(event_hooks=event_hooks(settings.llm_timeout)))
        self._mode_index = MODES.index(settings.llm_response_format) if settings.llm_response_format in MODES else 0
        self._mode_lock = threading.Lock()
        self._tools_refused = False

    @property
    def mode(self) -> str:
        return MODES[self._mode_index]

    def structured(self, system: str, user: str, answer: type[Answer], usage: Usage, purpose: str) -> Answer:
        """One logical call: returns a validated answer or raises LLMFailure."""
        return self._with_retries(purpose, lambda: self._attempt(system, user, answer, usage, purpose))

    def tool_calls(self, system: str, user: str, tools: list[dict], usage: Usage, purpose: str) -> list[ToolCall]:
        """An agent turn with OpenAI tool calling; the calls come back in emission order.
        Endpoints without tool support get the same tools described as a JSON answer."""
        return self._with_retries(purpose, lambda: self._attempt_tools(system, user, tools, usage, purpose))

    def _with_retries(self, purpose: str, attempt_once):  # type: ignore[no-untyped-def]
        import openai

        backoff = wait_exponential(multiplier=self.settings.llm_retry_base_seconds, max=MAX_WAIT_SECONDS)
        retrying = Retrying(
            # a Retry-After longer than any pause here ends the call: the input waits with the writer's backoff
            stop=stop_after_attempt(self.settings.llm_max_retries + 1) | _told_to_wait_long,
            wait=lambda state: max(backoff(state), _retry_after(state.outcome.exception())),
            retry=retry_if_exception_type((openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                                           openai.InternalServerError, openai.APIResponseValidationError,
                                           _BadAnswer)),
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return attempt_once()
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            failure = (LLMUnreachable if _unreachable(cause) else
                       LLMRateLimited if isinstance(cause, openai.RateLimitError) else LLMFailure)
            raise failure(f"LLM {purpose} failed after {self.settings.llm_max_retries + 1} attempts: "
                          f"{_described(cause)}") from cause
        except openai.APIStatusError as exc:  # 4xx other than a refused format: retrying will not help
            raise LLMFailure(f"LLM {purpose} refused: {_described(exc)}") from exc
        raise LLMFailure(f"LLM {purpose} gave no answer")

    def _attempt_tools(self, system: str, user: str, tools: list[dict], usage: Usage, purpose: str) -> list[ToolCall]:
        import openai

        if not self._tools_refused:
            try:
                message = self._create(system, user, usage, purpose, tools=tools, tool_choice="auto").message
            except (openai.InternalServerError, openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if "tool" not in (str(exc.message) + str(getattr(exc, "body", ""))).lower():
                    raise
                self._tools_refused = True
                log.warning("LLM endpoint refused tool calling; describing the tools as a JSON answer")
            else:
                calls = []
                for call in message.tool_calls or []:
                    try:
                        arguments = json.loads(call.function.arguments or "{}")
                    except json.JSONDecodeError:
                        raise _BadAnswer(f"tool call {call.function.name} has broken arguments") from None
                    calls.append(ToolCall(call.function.name, arguments if isinstance(arguments, dict) else {}))
                return calls
        described = "\n".join(json.dumps(tool["function"]) for tool in tools)
        plan = self._attempt(f"{system}\n\nTools (answer with the calls, in order):\n{described}", user, _ToolPlan,
                             usage, purpose)
        return [ToolCall(call.tool, call.arguments) for call in plan.calls]

    def _attempt(self, system: str, user: str, answer: type[Answer], usage: Usage, purpose: str) -> Answer:
        while True:
            mode = self.mode
            try:
                content = self._complete(system, user, answer, mode, usage, purpose)
            except _FormatRefused:
                with self._mode_lock:
                    if self.mode == mode and self._mode_index < len(MODES) - 1:
                        self._mode_index += 1
                        log.warning("LLM endpoint refused response_format %s; using %s", mode, self.mode)
                continue
            return parse_answer(content, answer)

    def _complete(self, system: str, user: str, answer: type[BaseModel], mode: str, usage: Usage,
                  purpose: str) -> str:
        import openai

        schema = answer.model_json_schema()
        kwargs: dict = {}
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": answer.__name__, "schema": decoding_schema(schema)}}
        elif mode == "json_object":  # llama.cpp's server (llama-cpp-python) decodes to this schema
            kwargs["response_format"] = {"type": "json_object", "schema": decoding_schema(schema)}
        if mode != "json_schema":
            system = f"{system}\n\nAnswer with one JSON object only, matching this JSON schema:\n{json.dumps(schema)}"
        try:
            choice = self._create(system, user, usage, purpose, **kwargs)
        except (openai.InternalServerError, openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if mode != "prompt" and _REFUSED_FORMAT.search(str(exc.message) + str(getattr(exc, "body", ""))):
                raise _FormatRefused() from exc
            raise
        return choice.message.content or ""

    def _create(self, system: str, user: str, usage: Usage, purpose: str, **kwargs):  # type: ignore[no-untyped-def]
        """The HTTP call itself, counted in `usage` and in metrics."""
        from openai.types.chat import ChatCompletion

        usage.calls += 1
        LLM_CALLS.labels(purpose=purpose).inc()
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=self.model, temperature=self.settings.llm_temperature,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}], **kwargs)
        finally:
            usage.seconds += time.perf_counter() - started
        if not isinstance(response, ChatCompletion) or not isinstance(response.choices, list):
            raise _BadAnswer("the endpoint's answer is not a chat completion")
        if not response.choices or getattr(response.choices[0], "message", None) is None:
            raise _BadAnswer("no choices in the answer")
        if response.usage is not None:
            usage.prompt_tokens += response.usage.prompt_tokens or 0
            usage.completion_tokens += response.usage.completion_tokens or 0
            LLM_TOKENS.labels(purpose=purpose).inc(response.usage.total_tokens or 0)
        return response.choices[0]


def _unreachable(cause: BaseException | None) -> bool:
    import openai

    return isinstance(cause, openai.APIConnectionError) and not isinstance(cause, openai.APITimeoutError)


def _retry_after(cause: BaseException | None) -> float:
    """The seconds a rate-limited endpoint asks to wait (`retry-after-ms` or `retry-after` in
    seconds, as OpenAI and vLLM send them); 0 when it names none."""
    import openai

    if not isinstance(cause, openai.RateLimitError):
        return 0.0
    headers = cause.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name, "")) * scale)
        except ValueError:
            continue
    return 0.0


def _told_to_wait_long(state: RetryCallState) -> bool:
    return state.outcome is not None and _retry_after(state.outcome.exception()) > MAX_WAIT_SECONDS


def _described(cause: BaseException | None) -> str:
    """What failed, in words that hold no prompt text: the exception's type, the HTTP status and
    the server's short error code, or the client's own message about a bad answer."""
    import openai

    if isinstance(cause, _BadAnswer):
        return f"{type(cause).__name__}: {cause}"
    if isinstance(cause, openai.APIStatusError):
        code = cause.code if isinstance(cause.code, str) and _ERROR_CODE.fullmatch(cause.code) else None
        return f"HTTP {cause.status_code}" + (f" ({code})" if code else "")
    return type(cause).__name__


def parse_answer(content: str, answer: type[Answer]) -> Answer:
    """Validate the model's JSON; tolerate code fences and prose around one JSON object."""
    text = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise _BadAnswer(f"no JSON object in the answer ({len(content)} characters)")
        text = text[start:end + 1]
    try:
        return answer.model_validate_json(text)
    except ValidationError as exc:
        # Only where the answer went wrong, never its values: they are memory text, and this
        # message reaches logs, the raw input's error and the event log.
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['type']}" for e in exc.errors()[:3])
        raise _BadAnswer(f"answer does not match {answer.__name__} ({where})") from None


def reachability(settings: Settings) -> dict:
    """Whether the configured OpenAI-compatible endpoint answers `GET /models` (2 s budget)."""
    if not settings.llm_configured:
        return {"configured": False, "ok": None, "detail": "no LLM configured: raw-only mode"}
    import httpx

    headers = {}
    if settings.llm_api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {settings.llm_api_key.get_secret_value()}"
    try:
        response = httpx.get(settings.llm_base_url.rstrip("/") + "/models", headers=headers, timeout=2.0)
        return {"configured": True, "ok": response.status_code < 500, "status_code": response.status_code}
    except httpx.HTTPError as exc:
        return {"configured": True, "ok": False, "detail": type(exc).__name__}
