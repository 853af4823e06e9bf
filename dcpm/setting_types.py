"""What a setting's value may be where anything else means nothing (dcpm.config): a weight in
[0, 1], a count, a port, a crontab expression, a database URL. A value outside is refused when
the settings are read, so a typo stops every command with its name instead of surfacing later as
a wrong ranking, an empty search, a daemon that dies at its first night, or a store that starts
afresh in the current directory (an empty data directory). No setting is NaN or
infinite either (Settings.model_config)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

DEFAULT_CRON = "0 3 * * *"

Share = Annotated[float, Field(ge=0, le=1)]  # a weight, or a threshold on a score in [0, 1]
Fraction = Annotated[float, Field(ge=0, lt=1)]  # a share that cannot be the whole (dropout, held out)
Cosine = Annotated[float, Field(ge=-1, le=1)]
CosineDistance = Annotated[float, Field(gt=0, le=2)]
Positive = Annotated[float, Field(gt=0)]  # a width or scale something divides by, a wait that must pass
NonNegative = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]  # 0: none, off, or the library's default
AtLeastOne = Annotated[int, Field(ge=1)]
Port = Annotated[int, Field(ge=1, le=65535)]


def check_crontab(value: str) -> str:
    """The schedule's own parser. The default is known good: it is not parsed, as importing the
    scheduler would add 15 ms to every command."""
    if value != DEFAULT_CRON:
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a crontab expression like {DEFAULT_CRON!r}: {exc}") from None
    return value


def check_database_url(value: str) -> str:
    """A URL SQLAlchemy can open: its scheme names a dialect, and a driver that is installed. Only
    the scheme is quoted back: the rest may hold a password."""
    if value:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        scheme = value.split("://", 1)[0]
        try:
            make_url(value).get_dialect().import_dbapi()
        except NoSuchModuleError:  # an ArgumentError too
            raise ValueError(f"SQLAlchemy knows no database {scheme!r} (sqlite, postgresql, ...)") from None
        except ArgumentError:
            raise ValueError("not a database URL (dialect+driver://user:password@host/database)") from None
        except ImportError as exc:
            raise ValueError(f"the driver for {scheme!r} URLs is not installed ({exc})") from None
    return value


Crontab = Annotated[str, AfterValidator(check_crontab)]
DatabaseUrl = Annotated[str, AfterValidator(check_database_url)]


EMPTY_DATA_DIR = "the data directory is empty: name one, or leave it unset for ~/.dcpm"


def check_named(value: Any) -> Any:
    """DCPM_DATA_DIR=$UNSET read as a path is the current directory: a new, empty store there."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(EMPTY_DATA_DIR)
    return value


DataDir = Annotated[Path, BeforeValidator(check_named)]
