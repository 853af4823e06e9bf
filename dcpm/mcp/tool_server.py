"""The SDK's MCPServer with dcpm's conventions applied to every tool in one place: descriptions
read as plain paragraphs (not docstrings with their indentation and line breaks), results carry a
short text plus structured content, and dcpm's errors and invalid arguments reach the model as a
tool error saying what was wrong instead of the SDK's bare "Error executing tool"."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from dcpm.errors import DcpmError, Invalid, invalid_from

log = logging.getLogger(__name__)
Request = TypeVar("Request", bound=BaseModel)

# The first words of a tool error, by dcpm.errors code: what kind of problem, so the model knows
# whether to fix its arguments, look the id up again, or try later.
ERROR_LABELS = {"invalid": "Invalid request", "not_found": "Not found", "conflict": "Conflict, try again",
                "unavailable": "Memory unavailable, try again later", "storage_full": "Memory storage full",
                "unauthorized": "Not authorized", "forbidden": "Forbidden"}


def plain(description: str) -> str:
    """A docstring as the model should read it: paragraphs joined into single lines, no indentation."""
    paragraphs = inspect.cleandoc(description).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs if paragraph.strip())


def reply(text: str, result: BaseModel) -> CallToolResult:
    """A tool's answer: `text` for the model, `result` as structured content (None fields left out)."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json", exclude_none=True))


def tool_error(error: DcpmError) -> CallToolResult:
    label = ERROR_LABELS.get(error.code, "Error")
    return CallToolResult(content=[TextContent(type="text", text=f"{label}: {error.message}")], is_error=True)


def invalid_arguments(error: ValidationError) -> Invalid:
    """Pydantic's complaint in dcpm's words (`limit: Input should be ...`), without its "Value
    error" prefix or a field name the message already starts with (`query is empty`)."""
    errors = []
    for problem in error.errors(include_url=False):
        message = problem["msg"].removeprefix("Value error, ")
        where = ".".join(str(part) for part in problem["loc"])
        errors.append({"loc": () if message.startswith(where) else problem["loc"], "msg": message})
    return invalid_from(errors, skip=())


def validated(model: type[Request], **fields: Any) -> Request:
    """A request model built inside a tool; its validation errors are the caller's, as Invalid."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise invalid_arguments(exc) from None


class MemoryToolServer(MCPServer):
    def add_tool(self, fn: Callable[..., Any], name: str | None = None, title: str | None = None,
                 description: str | None = None, **options: Any) -> None:
        super().add_tool(fn, name=name, title=title, description=plain(description or fn.__doc__ or ""), **options)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        """The SDK wraps what a tool raises (and arguments that fail its schema) in a ToolError;
        dcpm's own errors and the argument errors are unwrapped into a tool error result here."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and type(exc) is ToolError:  # arguments off the input schema
                cause = invalid_arguments(cause)
            if not isinstance(cause, DcpmError):
                raise
            log.info("tool %s refused: %s", name, cause.code)
            return tool_error(cause)
