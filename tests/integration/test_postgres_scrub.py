"""A hard delete on PostgreSQL leaves the deleted text in no row version of the store, read from
the table files themselves (pgserver's files belong to this test's user): after a plain delete
no tuple on any heap page holds it (VACUUM; the page's free space may until overwritten, see
dcpm.store.vacuum), and after a delete asked to compact, no byte of the database's files does
(VACUUM FULL rewrote the tables)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.service import MemoryService

from ..conftest import shared_store

PAGE = 8192
LP_NORMAL = 1
SECRET = "the safe behind the Klimt print opens with 31-08-1962"
OTHERS = [Turn(text="We planted garlic along the fence this weekend", speaker="Ines"),
          Turn(text="Choir rehearsal ran late because the tenors kept drifting sharp", speaker="Ines")]


@pytest.fixture
def svc(postgres_url, tmp_path, embedder):
    service = MemoryService(Settings(data_dir=tmp_path / "data", **shared_store(postgres_url)), embedder=embedder)
    yield service
    service.close()


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def heap_files(url: str) -> tuple[Path, list[Path]]:
    """After a CHECKPOINT (so the pages are on disk): the database's directory and the files of
    every table and TOAST table in it, segments included."""
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        pgdata = Path(conn.execute("SHOW data_directory").fetchone()[0])
        directory = conn.execute("SELECT 'base/' || oid FROM pg_database WHERE datname = current_database()")
        relations = conn.execute("SELECT pg_relation_filepath(oid) FROM pg_class WHERE relkind IN ('r', 't', 'm') "
                                 "AND pg_relation_filepath(oid) LIKE 'base/%'").fetchall()
        base = pgdata / directory.fetchone()[0]
    files = [segment for (path,) in relations for segment in (pgdata / path).parent.glob(Path(path).name + "*")
             if segment.name.split(".")[0] == Path(path).name and "_" not in segment.name]
    return base, files


def tuples(path: Path) -> list[bytes]:
    """Every tuple a heap file's line pointers still point at (live or dead), read from its pages."""
    data = path.read_bytes()
    found = []
    for start in range(0, len(data), PAGE):
        page = data[start:start + PAGE]
        lower = int.from_bytes(page[12:14], "little")
        for slot in range(24, lower, 4):  # the line pointers follow the 24-byte page header
            word = int.from_bytes(page[slot:slot + 4], "little")
            offset, flags, length = word & 0x7FFF, (word >> 15) & 0x3, word >> 17
            if flags == LP_NORMAL:
                found.append(page[offset:offset + length])
    return found


def tuples_holding(url: str, text: str) -> int:
    return sum(text.encode() in row for path in heap_files(url)[1] for row in tuples(path))


def files_holding(url: str, text: str) -> list[str]:
    base, _ = heap_files(url)
    return [p.name for p in base.iterdir() if p.is_file() and text.encode() in p.read_bytes()]


def test_a_hard_delete_leaves_no_row_version_holding_the_text(svc, postgres_url):
    svc.import_turns("ines", OTHERS + [Turn(text=SECRET, speaker="Ines")])
    assert tuples_holding(postgres_url, SECRET) >= 1  # the raw turn's row (and its event) before
    secret = next(m.id for m in svc.list_memories("ines", kind="raw").items if m.text == SECRET)
    svc.delete_memory(secret)
    assert tuples_holding(postgres_url, SECRET) == 0
    assert tuples_holding(postgres_url, OTHERS[0].text) == 1  # the other turns are untouched
    with psycopg.connect(libpq(postgres_url)) as conn:
        assert conn.execute("SELECT count(*) FROM raw_inputs").fetchone()[0] == len(OTHERS)


def test_a_compacting_delete_leaves_no_byte_of_the_text_in_the_database_files(svc, postgres_url):
    svc.import_turns("ines", OTHERS + [Turn(text=SECRET, speaker="Ines")])
    svc.import_turns("noor", [Turn(text="Noor keeps bees on the allotment", speaker="Noor")])
    assert files_holding(postgres_url, SECRET)
    svc.delete_user("ines", compact=True)
    assert files_holding(postgres_url, SECRET) == []
    assert files_holding(postgres_url, "Noor keeps bees")  # what is left was rewritten, not lost
