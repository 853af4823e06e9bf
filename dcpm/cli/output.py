"""What every command shares: the consoles, `--json` output, times, progress bars, the global
options (`Overrides`), the settings and the `Memory` a command works on, and the translation of a
refused request into the project's error. Command modules import this, never `dcpm.cli.main`."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ContextManager, Iterator

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from dcpm.errors import Invalid, invalid_from

if TYPE_CHECKING:
    from dcpm.api.protocol import Memory
    from dcpm.config import Settings

# Memory text is the user's, and may hold anything: `[/bold]` would crash Rich's markup parser and
# `[link=...]` would print a live link. So nothing printed is read as markup or emoji codes; styles
# are given as `Text` (see `heading`).
out = Console(markup=False, emoji=False)
err = Console(stderr=True, markup=False, emoji=False)

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@dataclass
class Overrides:
    """The global options of one invocation (`dcpm --data-dir D --config F ...`), set by the
    app's callback and applied by `settings()`; nothing is passed on through the environment."""

    data_dir: Path | None = None
    config: Path | None = None


OVERRIDES = Overrides()


def settings(**fields: Any) -> Settings:
    """The effective settings: `fields`, then the global options, then DCPM_* and the TOML file."""
    from dcpm.config import load_settings

    overrides = {"data_dir": OVERRIDES.data_dir} if OVERRIDES.data_dir is not None else {}
    try:
        with _toml_file(OVERRIDES.config):
            return load_settings(**{**overrides, **fields})
    except Exception as exc:  # pydantic's message names the bad setting
        raise Invalid(f"bad settings: {exc}") from None


@contextmanager
def _toml_file(path: Path | None) -> Iterator[None]:
    """`--config`, for the one call that reads the settings. `Settings.settings_customise_sources`
    (dcpm.config) takes the TOML file's path only from DCPM_CONFIG, and passing the file's values
    as init arguments instead would rank them above DCPM_* variables; so the variable is set while
    the settings load and put back right after: no later code, and no process spawned from here,
    sees it."""
    if path is None:
        yield
        return
    saved = os.environ.get("DCPM_CONFIG")
    os.environ["DCPM_CONFIG"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("DCPM_CONFIG", None)
        else:
            os.environ["DCPM_CONFIG"] = saved


def memory() -> ContextManager[Memory]:
    """The daemon's client when one serves this data directory, else the store opened here (which
    loads the embedding model only for a command that embeds, and says so: `loading`)."""
    from dcpm.service import open_memory

    return open_memory(settings(), loading=loading)


@contextmanager
def loading(what: str) -> Iterator[None]:
    """One line on stderr before something slow loads (the model: seconds), so a command that
    embeds does not look hung; a line rather than a spinner, as a progress bar may be showing."""
    err.print(f"{what} …", highlight=False)
    yield


def request(model: Any, **fields: Any) -> Any:
    """`model(**fields)`; a refusal is the project's Invalid (exit code 2), worded as the API's."""
    from pydantic import ValidationError

    try:
        return model(**fields)
    except ValidationError as exc:
        raise invalid_from(exc.errors()) from None


def dump(value: Any) -> None:
    if isinstance(value, list):
        data = [v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in value]
    else:
        data = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    out.print_json(json.dumps(data, default=str))


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "-"


def heading(kind: str, rest: str) -> Text:
    """`kind` in bold, then `rest` as it is."""
    return Text.assemble((kind, "bold"), " ", rest)


def private_file(path: Path) -> None:
    """Only the owner may read what dcpm wrote there (an export holds a user's whole memory)."""
    path.chmod(0o600)


def progress() -> Progress:
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=err, transient=False)
