"""What every command shares: the consoles, --json output, times, progress bars, settings and
the `Memory` the command works on. Command modules import this, never `dcpm.cli.main`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, ContextManager

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from dcpm.errors import Invalid

out = Console()
err = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def settings():  # type: ignore[no-untyped-def]
    from dcpm.config import load_settings

    try:
        return load_settings()
    except Exception as exc:  # pydantic's message names the bad setting
        raise Invalid(f"bad settings: {exc}") from None


def memory() -> ContextManager[Any]:
    """The daemon's client when one serves this data directory, else the store opened here."""
    from dcpm.service import open_memory

    return open_memory(settings())


def dump(value: Any) -> None:
    if isinstance(value, list):
        data = [v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in value]
    else:
        data = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    out.print_json(json.dumps(data, default=str))


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "-"


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=err, transient=False)


def request(model: Any, **fields: Any) -> Any:
    from pydantic import ValidationError

    try:
        return model(**fields)
    except ValidationError as exc:
        raise Invalid("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


