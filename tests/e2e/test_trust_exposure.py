"""What an operator meets at the edges, driven as subprocesses: `dcpm serve` and `dcpm mcp` refuse
to expose an unauthenticated server to the network, the CLI prints memory text literally (never
as Rich markup), the data directory and exports are private to their owner, a failed input says
why in `dcpm show` and on the admin page, and only the operator switches access control off."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from dcpm.auth import ADMIN, authenticate
from dcpm.config import Settings
from dcpm.domain import RawStatus
from dcpm.errors import Unauthorized
from dcpm.store.db import Database
from dcpm.store.models import RawInput

from .daemon import Daemon, dcpm_env, free_port, run_cli
from .browser import Browser
from .test_admin_page import open_admin

TOKEN = "admin-s3cret"
MARKUP = "Ana wrote [/bold] on the hive box, then [link=http://evil.example]this[/link] :bee: [bold red]"
WHY = "LLM answered 400: context_length_exceeded"
WIDE = {"COLUMNS": "400"}  # one table row per line, so the text is not folded


def refused(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`dcpm ARGS` that must stop on its own; one still serving after a minute has not refused."""
    try:
        return subprocess.run([sys.executable, "-m", "dcpm.cli", *args], env=dcpm_env(data_dir, **env),
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"dcpm {' '.join(args)} kept serving instead of refusing") from None


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def fail_input(data_dir: Path, raw_id: str) -> None:
    """What the writer does after `writer_max_attempts`, done here directly in the store."""
    db = Database(Settings(data_dir=data_dir).sqlalchemy_url)
    try:
        with db.session() as session:
            session.execute(update(RawInput).where(RawInput.id == raw_id)
                            .values(status=RawStatus.FAILED, error=WHY, attempts=5))
    finally:
        db.close()


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, str]:
    """A data directory the CLI made, holding one verbatim turn of Ana's full of markup."""
    data_dir = tmp_path_factory.mktemp("cli") / "data"
    added = json.loads(run_cli(data_dir, "add", "ana", MARKUP, "--no-infer", "--json").stdout)
    return data_dir, added["raw_ids"][0]


# --- exposure (finding 2, 9) -------------------------------------------------------------------

def test_serving_a_network_address_with_no_credential_refuses_to_start(tmp_path):
    result = refused(tmp_path / "data", "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert result.returncode == 2
    assert "--allow-open-network" in result.stderr and "DCPM_API_TOKEN" in result.stderr


def test_serving_every_address_when_the_operator_allows_it(tmp_path):
    data_dir = tmp_path / "data"
    with Daemon(data_dir, DCPM_HOST="0.0.0.0", DCPM_ALLOW_OPEN_NETWORK="true") as daemon:
        assert httpx.get(f"{daemon.url}/v1/users", timeout=10).status_code == 200
        assert private(data_dir / "daemon.json") and private(data_dir / "dcpm.lock")


@pytest.mark.parametrize("args", [("--transport", "http"),
                                  ("--transport", "http", "--user", "ana", "--host", "0.0.0.0")],
                         ids=["no user", "network address"])
def test_mcp_over_http_needs_one_user_and_a_loopback_address(tmp_path, args):
    result = refused(tmp_path / "data", "mcp", *args, "--port", str(free_port()), DCPM_API_TOKEN=TOKEN)
    assert result.returncode == 2 and ("--user" in result.stderr or "--allow-open-network" in result.stderr)


# --- the CLI (finding 15) ----------------------------------------------------------------------

@pytest.mark.parametrize("command", [("search", "ana", "hive box"), ("items", "ana", "--kind", "raw"), ("show",)],
                         ids=["search", "items", "show"])
def test_the_cli_prints_memory_text_literally(stored, command):
    data_dir, raw_id = stored
    args = (*command, raw_id) if command == ("show",) else command
    result = run_cli(data_dir, *args, **WIDE)
    assert MARKUP in result.stdout


def test_the_data_directory_and_exports_are_private_to_their_owner(stored, tmp_path):
    data_dir, _ = stored
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert (data_dir / "dcpm.db").exists() and (data_dir / "dcpm.lock").exists()
    assert [path for path in data_dir.rglob("*") if not private(path)] == []
    fresh, existing = tmp_path / "ana.jsonl", tmp_path / "old.jsonl"
    existing.write_text("an older export")
    existing.chmod(0o644)
    for path in (fresh, existing):
        run_cli(data_dir, "export", "ana", "-o", str(path))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and MARKUP in path.read_text()


def test_show_says_why_an_input_failed(stored):
    data_dir, raw_id = stored
    fail_input(data_dir, raw_id)
    shown = run_cli(data_dir, "show", raw_id, **WIDE).stdout
    assert "status failed" in shown and WHY in shown


# --- access control stays on until the operator says otherwise (finding 1) ---------------------

def test_only_the_operator_switches_access_control_off(tmp_path):
    data_dir = tmp_path / "data"
    key = run_cli(data_dir, "keys", "create", "--user", "ana").stdout.strip()
    in_use = run_cli(data_dir, "keys", "reset-access", "--yes", check=False)
    assert in_use.returncode == 5 and "revoke" in in_use.stderr
    run_cli(data_dir, "keys", "revoke", key.split("_")[1])
    settings = Settings(data_dir=data_dir)
    db = Database(settings.sqlalchemy_url)
    try:
        with pytest.raises(Unauthorized):
            authenticate(None, settings, db)  # the last key revoked: still closed
        assert "off" in run_cli(data_dir, "keys", "reset-access", "--yes").stdout
        assert authenticate(None, settings, db) == ADMIN
    finally:
        db.close()


# --- failed inputs on the admin page (finding 3's visibility) ------------------------------------

def test_the_admin_page_shows_failed_inputs_and_searches_from_its_own_origin(tmp_path):
    data_dir = tmp_path / "data"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with Daemon(data_dir, DCPM_API_TOKEN=TOKEN) as daemon:
        raw_ids = [httpx.post(f"{daemon.url}/v1/memories", headers=headers, timeout=60,
                              json={"user_id": "ana", "text": text, "infer": False}).json()["raw_ids"][0]
                   for text in ("Ana keeps bees on her allotment", "Ana pasted her whole thesis here")]
        fail_input(data_dir, raw_ids[1])
        with Browser(tmp_path / "profile") as browser:
            dom = open_admin(browser, f"{daemon.url}/admin#token={TOKEN}&user=ana&q=who+keeps+bees+on+an+allotment")
    assert "Ana pasted her whole thesis here" in dom and WHY in dom and "failed" in dom
    assert "Ana keeps bees on her allotment" in dom and "lexical" in dom  # the search (a same-origin POST) ran
