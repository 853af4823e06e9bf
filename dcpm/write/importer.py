"""`dcpm import FILE.jsonl`: bulk raw ingest of a chat history.

Every line is validated before anything is written (errors name the line), then lines are
imported in batches with one embedding call each. Raw ids are derived from the line's content,
so a re-run, or a run resumed after an interruption, skips what is already stored (the store
scopes them to the user: see dcpm.write.raw.stored_raw_id).
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

from dateutil import parser as dateparser
from dateutil.parser import UnknownTimezoneWarning

from dcpm.config import Settings
from dcpm.domain import Turn, as_utc, check_user_id, unix_time
from dcpm.errors import Invalid
from dcpm.write.raw import check_turns, deterministic_raw_id

MAX_REPORTED_ERRORS = 20
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8


@dataclass
class ImportLine:
    user_id: str
    turn: Turn


def parse_line(raw: str, default_user: str | None) -> ImportLine:
    """One JSON object: text|content, and optionally user_id, role, speaker|name, session_id,
    timestamp (see `moment`), metadata, id."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    user_id = record.get("user_id") or default_user
    if not user_id:
        raise ValueError("no user_id (give one per line or --user)")
    check_user_id(str(user_id))
    text = record.get("text", record.get("content"))
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no text")
    timestamp = record.get("timestamp")
    when: datetime | None = None
    if timestamp is not None:
        try:
            when = moment(timestamp)
        except (ValueError, OverflowError) as exc:
            why = f": {exc}" if isinstance(exc, UnclearTimestamp) else ""
            raise ValueError(f"unreadable timestamp {timestamp!r}{why}") from None
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be an object")
    return ImportLine(str(user_id), Turn(
        text=text, role=str(record.get("role", "user")), speaker=label(record.get("speaker") or record.get("name"),
                                                                      "speaker"),
        session_id=label(record.get("session_id"), "session_id"), timestamp=when, metadata=metadata,
        id=str(record["id"]) if record.get("id") is not None else None,
    ))


def label(value: object, what: str) -> str | None:
    """A line's speaker or session id: text as written, a whole number as its digits (chat exports
    number their sessions), anything else refused (the store keeps text)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kind = {bool: "true or false", float: "a fraction", dict: "an object", list: "an array"}.get(type(value), "no text")
    raise ValueError(f"{what} must be text, not {kind}")


class UnclearTimestamp(ValueError):
    """A timestamp dateutil would read wrong: a date named only in part ("March 2024", "10:30",
    "Tuesday"), or a zone named by an abbreviation it does not know ("EST": read as no zone)."""


def moment(value: object) -> datetime:
    """A line's timestamp: text in any common date form naming year, month and day, else Unix time
    in UTC (a number, or text that reads as no date), the rule the HTTP API reads a number with
    (dcpm.domain.unix_time)."""
    if isinstance(value, str):
        try:
            # dateutil completes a date from its `default` (today, unless given): with two defaults
            # apart in year, month and day, a date that names all three reads the same either way.
            with warnings.catch_warnings():
                warnings.simplefilter("error", UnknownTimezoneWarning)
                when = dateparser.parse(value, default=datetime(2000, 1, 1))
                whole = when == dateparser.parse(value, default=datetime(2001, 2, 2))
            as_utc(when)  # the store keeps UTC: 9999-12-31T23:59:59-12:00 has no UTC date
        except UnknownTimezoneWarning:
            raise UnclearTimestamp("its zone is no name dcpm can place; write an offset such as -05:00") from None
        except (ValueError, OverflowError):
            pass
        else:
            if not whole:  # "2024", "12" too: digits that read as a date are one ("20240101" is)
                raise UnclearTimestamp("a date needs its year, month and day (the day of the import is no answer)")
            return when  # as written: a line's id is derived from it (re-runs must find the same ids)
    if isinstance(value, (int, float, str)):  # a bool is refused by unix_time
        return unix_time(value)
    raise ValueError(f"unreadable timestamp {value!r}")


def read_file(path: Path, default_user: str | None, settings: Settings) -> list[ImportLine]:
    if path.is_dir():
        raise Invalid(f"{path} is a directory, not a file")
    if not path.is_file():
        raise Invalid(f"no such file: {path}")
    lines: list[ImportLine] = []
    errors: list[str] = []
    # -sig: a byte order mark (Notepad's) is no text; surrogateescape: bytes that are not UTF-8 are
    # read as lone surrogates (no JSON text holds one unescaped), so the line that has them is named.
    with path.open(encoding="utf-8-sig", errors="surrogateescape") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                if not_utf8 := NOT_UTF8.search(raw):
                    raise ValueError(f"not UTF-8 text (column {not_utf8.start() + 1})")
                line = parse_line(raw, default_user)
                check_turns([line.turn], settings)
                lines.append(line)
            except ValueError as exc:  # parse_line's, and check_turns' Invalid (an Invalid user id is both)
                errors.append(f"line {number}: {exc}")
            except Invalid as exc:
                errors.append(f"line {number}: {exc.message}")
    if errors:
        shown = "\n".join(errors[:MAX_REPORTED_ERRORS])
        more = f"\n... and {len(errors) - MAX_REPORTED_ERRORS} more" if len(errors) > MAX_REPORTED_ERRORS else ""
        raise Invalid(f"{len(errors)} bad line(s) in {path}; nothing was imported:\n{shown}{more}")
    assign_ids(lines)
    return once_each(lines)


def assign_ids(lines: list[ImportLine]) -> None:
    """Deterministic ids; identical lines get their occurrence number so none collapses."""
    seen: Counter[str] = Counter()
    for line in lines:
        if line.turn.id is None:
            key = deterministic_raw_id(line.user_id, line.turn, 0)
            line.turn.id = deterministic_raw_id(line.user_id, line.turn, seen[key])
            seen[key] += 1
        else:
            line.turn.id = deterministic_raw_id(line.user_id, line.turn, 0)


def once_each(lines: list[ImportLine]) -> list[ImportLine]:
    """A line that repeats an earlier one with the same explicit id is the same message sent
    twice: it is stored once (the store refuses one id twice in a batch)."""
    seen: set[tuple[str, str | None]] = set()
    unique = []
    for line in lines:
        key = (line.user_id, line.turn.id)
        if key not in seen:
            seen.add(key)
            unique.append(line)
    return unique


def batches(lines: list[ImportLine], size: int) -> Iterator[tuple[str, list[Turn]]]:
    """Per-user batches in file order."""
    pending: dict[str, list[Turn]] = defaultdict(list)
    for line in lines:
        pending[line.user_id].append(line.turn)
        if len(pending[line.user_id]) >= size:
            yield line.user_id, pending.pop(line.user_id)
    for user_id, turns in pending.items():
        yield user_id, turns


def import_lines(store_batch: Callable[[str, list[Turn]], int], lines: list[ImportLine], batch_size: int,
                 progress: Callable[[int], None] | None = None) -> int:
    imported = 0
    for user_id, turns in batches(lines, batch_size):
        imported += store_batch(user_id, turns)
        if progress:
            progress(len(turns))
    return imported
