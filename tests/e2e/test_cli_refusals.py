"""The CLI driven the way a careless user drives it: a file that is not what the command reads, a
value out of range. Each is refused with its exit code and one line on stderr (never a traceback),
and what was stored is unchanged."""

from __future__ import annotations

import signal

import pytest

from .daemon import cli_json, run_cli


def refused(data_dir, *args: str, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    """stderr of `dcpm ARGS`, which must fail with `code` and say why in one line."""
    result = run_cli(data_dir, *args, check=False)
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


def test_restoring_a_file_that_is_not_utf8_text_is_refused_in_one_line(tmp_path):
    data_dir = tmp_path / "data"
    binary = tmp_path / "photo.jpg"
    binary.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\xfe")
    assert "not a dcpm export" in refused(data_dir, "restore", str(binary))
    assert cli_json(data_dir, "users", "--json") == []


def test_an_event_limit_out_of_range_is_refused_without_a_daemon_as_the_daemon_refuses_it(tmp_path):
    data_dir = tmp_path / "data"
    run_cli(data_dir, "add", "ana", "I live in Lisbon", "--no-infer")
    for limit in ("-1", "0", "5001"):
        assert "limit must be 1..5000" in refused(data_dir, "events", "ana", "--limit", limit)
    assert len(cli_json(data_dir, "events", "ana", "--limit", "1", "--json")) == 1


def test_a_refused_value_is_worded_without_pydantics_value_error_prefix(tmp_path):
    message = refused(tmp_path / "data", "add", "ana", "")
    assert message.strip() == "error: messages.0.content: message content is empty"


@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_an_import_stopped_with_ctrl_c_says_how_far_it_got_and_a_rerun_finishes_it(tmp_path, stop, code):
    """Ctrl-C (SIGINT) or a SIGTERM (`timeout`, a service manager) mid-import: exit 128 + the signal
    and one line saying what is stored; the same command again imports the rest and skips what
    the first one stored."""
    import json
    import sqlite3
    import subprocess
    import sys
    import time
    from datetime import datetime, timedelta, timezone

    from tests.integration.life_of_ines import INES

    from .daemon import dcpm_env

    data_dir, history = tmp_path / "data", tmp_path / "ines.jsonl"
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    lines = [{"text": text, "speaker": "Inês", "session_id": f"year-{year}",
              "timestamp": (start + timedelta(days=365 * year + 2 * n)).isoformat()}
             for year in range(8) for n, text in enumerate(INES)]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    command = [sys.executable, "-m", "dcpm.cli", "import", str(history), "--user", "ines", "--batch-size", "40"]
    first = subprocess.Popen(command, env=dcpm_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # wait till some batches are stored, then press Ctrl-C
        try:
            with sqlite3.connect(data_dir / "dcpm.db") as db:
                if db.execute("SELECT count(*) FROM raw_inputs").fetchone()[0] >= 80:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    first.send_signal(stop)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == code, stderr
    assert "Traceback" not in stderr and "interrupted: at least" in stderr, stderr
    stored = int(stderr.split("at least ")[1].split(" ")[0])
    with sqlite3.connect(data_dir / "dcpm.db") as db:
        stored_now = db.execute("SELECT count(*) FROM raw_inputs").fetchone()[0]
    assert stored <= stored_now < len(lines) and stored_now >= 80  # a lower bound: the batch in flight may land
    second = run_cli(data_dir, "import", str(history), "--user", "ines", "--json")
    report = json.loads(second.stdout)
    assert report["skipped"] >= stored and report["imported"] + report["skipped"] == len(lines)
    assert cli_json(data_dir, "users", "--json")[0]["raw_inputs"] == len(lines)


def test_a_settings_path_that_is_a_directory_is_named_as_one(tmp_path):
    assert "is a directory, not a settings file" in refused(tmp_path / "data", "--config", str(tmp_path), "users")
    assert "no such settings file" in refused(tmp_path / "data", "--config", str(tmp_path / "none.toml"), "users")


def test_a_store_written_by_a_newer_dcpm_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    import sqlite3

    data_dir = tmp_path / "data"
    run_cli(data_dir, "users")
    with sqlite3.connect(data_dir / "dcpm.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    for command in (["users"], ["db", "upgrade"]):
        message = refused(data_dir, *command, code=6)
        assert "schema revision 9999" in message and "newer dcpm" in message, message
    with sqlite3.connect(data_dir / "dcpm.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999",)]


def test_a_store_file_that_is_no_database_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "dcpm.db").write_text("shopping list: tea, bread\n")
    message = refused(data_dir, "users", code=6)
    assert f"{data_dir / 'dcpm.db'} is not a SQLite database" in message, message
    assert (data_dir / "dcpm.db").read_text() == "shopping list: tea, bread\n"


def test_a_page_or_event_limit_out_of_range_is_refused_in_the_same_words_with_a_daemon(tmp_path):
    from .daemon import Daemon

    data_dir = tmp_path / "data"
    run_cli(data_dir, "add", "ana", "I live in Lisbon", "--no-infer")
    cases = [("items", "ana", "--limit", "0"), ("items", "ana", "--offset", "-1"), ("events", "ana", "--limit", "5001"),
             ("runs", "--limit", "0"), ("runs", "--limit", "-1")]  # SQLite's LIMIT -1: every run, unasked
    alone = [refused(data_dir, *case) for case in cases]
    assert alone[-1].strip() == "error: limit must be 1..1000"
    with Daemon(data_dir):
        assert [refused(data_dir, *case) for case in cases] == alone


def test_a_file_that_is_no_export_is_refused_in_the_same_words_naming_it_with_a_daemon(tmp_path):
    import hashlib
    import json

    from .daemon import Daemon

    data_dir, photo, notes, odd = tmp_path / "data", tmp_path / "photo.jpg", tmp_path / "notes.txt", tmp_path / "odd"
    photo.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\xfe")
    notes.write_text("buy green tea\n")
    body = "[1, 2]"  # under a manifest whose checksum holds: a record that is no {type, row} object
    manifest = {"format": "dcpm-export/1", "user_id": "ana", "sha256": hashlib.sha256(body.encode()).hexdigest()}
    odd.write_text(json.dumps({"manifest": manifest}) + "\n" + body + "\n")
    alone = [refused(data_dir, "restore", str(path)) for path in (photo, notes, odd)]
    assert all(str(path) in message for path, message in zip((photo, notes, odd), alone)), alone
    with Daemon(data_dir):
        assert [refused(data_dir, "restore", str(path)) for path in (photo, notes, odd)] == alone
    assert cli_json(data_dir, "users") == []


def test_an_empty_data_directory_is_refused_rather_than_read_as_the_current_one(tmp_path):
    """`--data-dir "$DIR"` or `DCPM_DATA_DIR=$DIR` with DIR unset: the store must not silently
    start afresh in whatever directory the command ran from."""
    import subprocess
    import sys

    from .daemon import dcpm_env

    here = tmp_path / "here"
    here.mkdir()
    for args, env in ((["--data-dir", "", "users"], dcpm_env(tmp_path / "data")),
                      (["users"], dcpm_env(tmp_path / "data", DCPM_DATA_DIR=""))):
        result = subprocess.run([sys.executable, "-m", "dcpm.cli", *args], env=env, cwd=here, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 2, (result.returncode, result.stderr)
        assert result.stderr.startswith("error: ") and "data" in result.stderr and "empty" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert list(here.iterdir()) == []


def test_delete_refuses_a_malformed_id_as_show_does_before_asking_or_loading_anything(tmp_path):
    data_dir = tmp_path / "data"
    assert "'nope' is not a graph node id (a UUID)" in refused(data_dir, "delete", "--node", "nope", "--yes")
    message = refused(data_dir, "delete", "nope")  # no --yes: refused before the question, not after
    assert "'nope' is not a memory id (a UUID)" in message and "loading" not in message


def test_an_unknown_log_level_is_refused_in_one_line_before_anything_starts(tmp_path):
    for command in ("serve", "mcp"):
        message = refused(tmp_path / "data", command, "--log-level", "loud")
        assert "--log-level takes" in message and "debug" in message, message
