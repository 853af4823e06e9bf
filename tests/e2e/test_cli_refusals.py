"""The CLI driven the way a careless user drives it: a file that is not what the command reads, a
value out of range. Each is refused with its exit code and one line on stderr (never a traceback),
and what was stored is unchanged."""

from __future__ import annotations

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
