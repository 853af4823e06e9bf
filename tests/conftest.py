"""Shared fixtures: the real embedder (loaded once per test run) and services on fresh data dirs.

`--db` picks the relational store: `sqlite` (the default store), `postgres` (every test that takes
the `settings` fixture runs on a fresh PostgreSQL database), or `both`, the default: tests marked
`storage` run on each, the rest on SQLite. PostgreSQL is a real server started once per run by
`pgserver` (dcpm.testing.postgres)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def embedder():
    from dcpm.config import Settings
    from dcpm.embedding import load_embedder

    return load_embedder(Settings())


DATABASES = ("sqlite", "postgres")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--db", choices=(*DATABASES, "both"), default="both",
                     help="the store tests run on: sqlite, postgres, or both (tests marked `storage` on each)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "storage: runs on SQLite and on PostgreSQL (with --db=both, the default)")
    config.addinivalue_line("markers", "sqlite_only: reads or alters the SQLite file itself; never runs on PostgreSQL")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--db")
    if metafunc.definition.get_closest_marker("sqlite_only"):
        databases: tuple[str, ...] = ("sqlite",)
    elif chosen == "both":
        databases = DATABASES if metafunc.definition.get_closest_marker("storage") else ("sqlite",)
    else:
        databases = (chosen,)
    if databases != ("sqlite",):  # tests on SQLite alone keep their plain names
        metafunc.parametrize("database", databases, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--db=sqlite` leaves out the tests that exist for PostgreSQL alone."""
    if config.getoption("--db") != "sqlite":
        return
    alone = [item for item in items if "postgres_server" in getattr(item, "fixturenames", ())]
    if alone:
        config.hook.pytest_deselected(items=alone)
        items[:] = [item for item in items if "postgres_server" not in getattr(item, "fixturenames", ())]


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One real PostgreSQL per test run, with a migrated template database for fresh copies. When
    a test failed, the server's log is kept and its end printed before its data directory goes
    (a crashed server would otherwise leave no trace on a CI machine)."""
    from dcpm.testing import postgres

    server = postgres.start(tmp_path_factory.mktemp("postgres") / "pgdata")
    template = postgres.migrated_template(server)
    yield server, template
    if request.session.testsfailed:
        kept = tmp_path_factory.getbasetemp() / "postgres.log"
        sys.__stderr__.write(postgres.keep_log(server, kept))
    server.cleanup()


def fresh_postgres(postgres_server) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test, dropped afterwards."""
    from dcpm.testing import postgres

    server, template = postgres_server
    database_url = postgres.fresh_database(server, template)
    yield database_url
    postgres.drop_database(server, database_url)


postgres_url = pytest.fixture(fresh_postgres, name="postgres_url")


@pytest.fixture
def database(request: pytest.FixtureRequest) -> str:
    """The store's URL for `settings`: empty for SQLite in the data directory."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return ""
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def another_database(request: pytest.FixtureRequest, database: str) -> str:
    """A second, separate store of the same kind (a restore target): empty for SQLite, whose file
    lives in the data directory, else a second fresh PostgreSQL database."""
    return request.getfixturevalue("postgres_url_2") if database else ""


postgres_url_2 = pytest.fixture(fresh_postgres, name="postgres_url_2")  # a second one, e.g. a restore target


@pytest.fixture
def db(settings):
    """The relational store alone (no index, no model), on the database `settings` names."""
    from dcpm.store.db import Database

    database = Database(settings.sqlalchemy_url)
    yield database
    database.close()


def shared_store(database_url: str) -> dict:
    """Settings for a store other processes may share: PostgreSQL needs a vector index every
    daemon shares too (Settings.check_shared_index); qdrant-client's local mode stands in here."""
    return {"database_url": database_url, "qdrant_url": ":memory:"} if database_url else {}


@pytest.fixture
def settings(tmp_path: Path, database: str):
    from dcpm.config import Settings

    return Settings(data_dir=tmp_path / "data", **shared_store(database))


@pytest.fixture
def service(settings, embedder) -> Iterator:
    from dcpm.service import MemoryService

    svc = MemoryService(settings, embedder=embedder)
    yield svc
    svc.close()
