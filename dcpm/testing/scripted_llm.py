"""A local OpenAI-compatible chat server for tests: real HTTP, scripted answers, and faults on
purpose (HTTP 500, HTTP 429 with a Retry-After, slow answers past the client's timeout, answers
trickled a byte at a time, broken JSON, llama.cpp's refusal of `json_schema`). The writer talks
to it through the real `openai` client."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Extraction = Callable[[list[str]], dict]
Reconcile = Callable[[list[tuple[str, list[tuple[str, str]]]]], dict]
Induction = Callable[[str], list[tuple[str, dict]]]  # the cluster prompt -> tool calls in order

# How the server tells dcpm's prompts apart: a phrase from each system prompt.
PURPOSES = {"keep a user's memory consistent": "reconcile", "consolidate an assistant's memory": "induce",
            "Describe the behaviour pattern": "behaviour", "cross-domain core schema": "core_schema"}


def purpose_of(system: str) -> str:
    return next((purpose for phrase, purpose in PURPOSES.items() if phrase in system), "extract")


def one_fact_per_turn(turns: list[str]) -> dict:
    """Default extraction: each turn becomes one identity item with its own words."""
    return {"items": [{"kind": "identity", "text": t.split(": ", 1)[-1], "topic": "other", "salience": 0.6}
                      for t in turns], "summary": None}


def add_everything(items: list[tuple[str, list[tuple[str, str]]]]) -> dict:
    return {"decisions": [{"item": n, "op": "ADD"} for n in range(1, len(items) + 1)]}


def supersede_first_candidate(items: list[tuple[str, list[tuple[str, str]]]]) -> dict:
    """Every item with a neighbour revises it: repeated adds about one topic build one chain."""
    return {"decisions": [{"item": n, "op": "SUPERSEDE", "target": shown[0][0]} if shown else {"item": n, "op": "ADD"}
                          for n, (_, shown) in enumerate(items, 1)]}


@dataclass
class ScriptedLLM:
    extract: Extraction = one_fact_per_turn
    reconcile: Reconcile = add_everything
    induce: Induction = lambda prompt: []  # noqa: E731
    behaviour: Callable[[str], str] = lambda prompt: "does things the same careful way every time"  # noqa: E731
    core_schema: Callable[[str], str] = lambda prompt: "plans ahead and sticks to the plan"  # noqa: E731
    # consumed one per request: "500", "429", "slow", "trickle" (a byte at a time over slow_seconds), "garbage"
    faults: deque = field(default_factory=deque)
    retry_after: str | None = None  # the Retry-After header of a "429"
    refuse_json_schema: bool = False  # behave like llama.cpp's server
    slow_seconds: float = 3.0
    calls: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict) -> tuple[int, Any]:
        with self.lock:
            self.calls.append(body)
            fault = self.faults.popleft() if self.faults else None
        response_format = body.get("response_format") or {}
        if self.refuse_json_schema and response_format.get("type") == "json_schema":
            return 500, {"error": {"message": "Input should be 'text' or 'json_object'", "code": 500}}
        if fault == "500":
            return 500, {"error": {"message": "scripted failure"}}
        if fault == "429":
            return 429, {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
        if fault == "slow":
            time.sleep(self.slow_seconds)
        system = body["messages"][0]["content"]
        prompt = body["messages"][1]["content"]
        purpose = purpose_of(system)
        tool_calls = None
        if purpose == "reconcile":
            content = self.reconcile(parse_reconcile_prompt(prompt))
        elif purpose == "induce":
            calls = self.induce(prompt)
            tool_calls = [{"id": f"call_{n}", "type": "function",
                           "function": {"name": name, "arguments": json.dumps(args)}}
                          for n, (name, args) in enumerate(calls)]
            content = None
        elif purpose == "behaviour":
            content = {"description": self.behaviour(prompt)}
        elif purpose == "core_schema":
            content = {"text": self.core_schema(prompt)}
        else:
            content = self.extract(parse_extract_prompt(prompt))
        text = "{'items': [oops" if fault == "garbage" else (json.dumps(content) if content is not None else None)
        message = {"role": "assistant", "content": text}
        if tool_calls is not None:
            message["tool_calls"] = tool_calls
        text = text or ""
        completion = {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model", "scripted"),
                     "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop",
                                  "message": message}],
                     "usage": {"prompt_tokens": len(system + prompt) // 4, "completion_tokens": len(text) // 4,
                               "total_tokens": (len(system + prompt) + len(text)) // 4}}
        return 200, Trickled(completion, self.slow_seconds) if fault == "trickle" else completion

    def purposes(self) -> list[str]:
        return [purpose_of(c["messages"][0]["content"]) for c in self.calls]


def parse_extract_prompt(prompt: str) -> list[str]:
    return [line for line in prompt.split("NEW TURNS:\n", 1)[1].splitlines() if line.strip()]


def parse_reconcile_prompt(prompt: str) -> list[tuple[str, list[tuple[str, str]]]]:
    items = []
    for block in prompt.split("\n\n"):
        head = re.match(r"NEW \d+: (.*)", block)
        if head:
            shown = re.findall(r"^\s+\[([\d.]+)\] (.*)$", block, re.MULTILINE)
            items.append((head.group(1), shown))
    return items


@dataclass(frozen=True)
class Trickled:
    """An answer sent after `seconds` of whitespace, one byte at a time (JSON allows it in front)."""

    payload: Any
    seconds: float


class LLMServer:
    def __init__(self, script: ScriptedLLM | None = None):
        self.script = script or ScriptedLLM()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any) -> None:
                padding = b" " * int(payload.seconds * 10) if isinstance(payload, Trickled) else b""
                data = padding + json.dumps(payload.payload if isinstance(payload, Trickled) else payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if status == 429 and server.script.retry_after is not None:
                    self.send_header("retry-after", server.script.retry_after)
                self.end_headers()
                try:
                    for byte in padding:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.1)
                    self.wfile.write(data[len(padding):])
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                status, payload = server.script.answer(body)
                self._send(status, payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> "LLMServer":
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
