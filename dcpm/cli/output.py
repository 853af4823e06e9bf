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
    from pydantic import ValidationError

    from dcpm.config import load_settings

    overrides = {"data_dir": OVERRIDES.data_dir} if OVERRIDES.data_dir is not None else {}
    try:
        with _toml_file(OVERRIDES.config):
            return load_settings(**{**overrides, **fields})
    except ValidationError as exc:
        raise Invalid(f"bad settings: {setting_problems(exc.errors())}") from None
    except Exception as exc:  # the TOML file's syntax
        raise Invalid(f"bad settings in {OVERRIDES.config or os.environ.get('DCPM_CONFIG')}: {exc}") from None


def setting_problems(errors: list[dict]) -> str:
    """`setting: what is wrong; ...` on one line, never the value (it may be a secret)."""
    worded = [{**error, "msg": "not a dcpm setting" if error["type"] == "extra_forbidden"
               else str(error["msg"]).removeprefix("Value error, ")} for error in errors]
    return invalid_from(worded).message


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


def file_to_read(path: Path) -> Path:
    """`path`, refused before anything opens when it is no file: said the same way whether a
    daemon or this process would have read it."""
    if path.is_dir():
        raise Invalid(f"{path} is a directory, not a file")
    if not path.is_file():
        raise Invalid(f"no such file: {path}")
    return path


def file_to_write(path: Path) -> Path:
    """`path`, refused before anything is read when no directory is there to hold it, or when
    something other than a file is in its place (writing an export over /dev/null as root would
    replace the device)."""
    if path.exists() and not path.is_file():
        raise Invalid(f"{path} is {'a directory' if path.is_dir() else 'not a regular file'}: name a file to write")
    if not path.parent.is_dir():
        raise Invalid(f"no such directory: {path.parent}")
    return path


def private_file(path: Path) -> None:
    """Only the owner may read what dcpm wrote there (an export holds a user's whole memory)."""
    path.chmod(0o600)


def progress() -> Progress:
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=err, transient=False)
