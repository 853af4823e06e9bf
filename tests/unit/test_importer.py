import json
from datetime import datetime, timedelta, timezone

import pytest

from dcpm.config import Settings
from dcpm.errors import Invalid
from dcpm.write.importer import assign_ids, parse_line, read_file
from dcpm.write.raw import check_turns


def test_parse_line_reads_speaker_and_timestamp():
    line = parse_line(json.dumps({"user_id": "ana", "text": "hi", "speaker": "Ana",
                                  "timestamp": "1:56 pm on 8 May, 2023"}), None)
    assert line.user_id == "ana" and line.turn.speaker == "Ana"
    assert line.turn.timestamp.year == 2023 and line.turn.timestamp.month == 5


def test_default_user_applies_when_line_has_none():
    assert parse_line('{"content": "hello"}', "bob").user_id == "bob"


@pytest.mark.parametrize("raw, problem", [
    ("{not json", "not valid JSON"),
    ('{"user_id": "ana"}', "no text"),
    ('{"text": "hi"}', "no user_id"),
    ('{"user_id": "a b", "text": "hi"}', "user_id"),
    ('{"user_id": "ana", "text": "hi", "timestamp": "someday maybe"}', "timestamp"),
    ('{"user_id": "ana", "text": "hi", "timestamp": "9999-12-31T23:59:59-12:00"}', "timestamp"),  # no UTC date
    ('{"user_id": "ana", "text": "tea \\ud800"}', "not valid Unicode"),
    ('{"user_id": "ana", "text": "tea", "metadata": {"note": "\\udfff"}}', "not valid Unicode"),
    ('{"user_id": "ana", "text": "tea", "metadata": {"n": NaN}}', "holds nan: numbers must be finite"),
    ('{"user_id": "ana", "text": "tea", "metadata": {"n": [-Infinity]}}', "holds -inf"),
    ('{"user_id": "ana", "text": "tea", "metadata": {"n": 1e999}}', "holds inf"),
    ('{"user_id": "ana", "text": "tea", "metadata": ' + '{"a": ' * 33 + "1" + "}" * 34, "deeper than 32 levels"),
    ('{"user_id": "ana", "text": "tea", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
], ids=["unknown-format", "no-text", "no-user", "bad-user", "unreadable-timestamp", "timestamp-past-utc",
        "surrogate-in-text", "surrogate-in-metadata", "nan", "minus-infinity", "overflowing-number",
        "metadata-33-deep", "json-too-deep"])
def test_bad_lines_are_named(raw, problem):
    """What `read_file` checks of every line before anything is imported."""
    with pytest.raises((ValueError, Invalid), match=problem):
        check_turns([parse_line(raw, None).turn], Settings())


def test_metadata_nested_32_deep_and_a_surrogate_pair_are_kept():
    deep = '{"a": ' * 32 + "1" + "}" * 32
    line = parse_line('{"user_id": "ana", "text": "tea \\ud83c\\udf75", "metadata": ' + deep + "}", None)
    assert line.turn.text == "tea \U0001f375"
    levels, inner = 0, line.turn.metadata
    while isinstance(inner, dict):
        levels, inner = levels + 1, inner["a"]
    assert (levels, inner) == (32, 1)


def test_identical_lines_get_distinct_but_stable_ids():
    lines = [parse_line('{"user_id": "ana", "text": "ok"}', None) for _ in range(2)]
    assign_ids(lines)
    again = [parse_line('{"user_id": "ana", "text": "ok"}', None) for _ in range(2)]
    assign_ids(again)
    assert lines[0].turn.id != lines[1].turn.id
    assert [line.turn.id for line in lines] == [line.turn.id for line in again]


def test_a_file_with_bad_lines_is_refused_whole(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"user_id": "ana", "text": "fine"}\n{"user_id": "ana"}\n')
    with pytest.raises(Invalid, match="line 2"):
        read_file(path, None, Settings(data_dir=tmp_path))


@pytest.mark.parametrize("timestamp, microsecond", [
    (1700000000, 0), (1700000000.5, 500000), ("1700000000", 0), (1700000000000, 0), (1700000000500, 500000),
])
def test_a_number_is_unix_time_in_utc_in_seconds_or_milliseconds(timestamp, microsecond):
    line = parse_line(json.dumps({"user_id": "ana", "text": "hi", "timestamp": timestamp}), None)
    assert line.turn.timestamp == datetime(2023, 11, 14, 22, 13, 20, microsecond, tzinfo=timezone.utc)


def test_digits_that_read_as_a_date_stay_a_date():
    line = parse_line('{"user_id": "ana", "text": "hi", "timestamp": "20240101"}', None)
    assert line.turn.timestamp == datetime(2024, 1, 1)


@pytest.mark.parametrize("timestamp", ["true", "1e20", "-1e20", "100000000000000000000000000000", '"1e400"'])
def test_a_bool_or_a_number_no_calendar_holds_is_refused(timestamp):
    with pytest.raises(ValueError, match="unreadable timestamp"):
        parse_line('{"user_id": "ana", "text": "hi", "timestamp": %s}' % timestamp, None)


@pytest.mark.parametrize("field, value", [("speaker", {"first": "Ana"}), ("speaker", True), ("name", 1.5),
                                          ("session_id", [1, 2]), ("session_id", False)])
def test_a_label_that_is_no_text_names_its_line_instead_of_crashing(tmp_path, field, value):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps({"user_id": "ana", "text": "fine"}) + "\n"
                    + json.dumps({"user_id": "ana", "text": "tea", field: value}) + "\n")
    with pytest.raises(Invalid, match=f"line 2: {'speaker' if field == 'name' else field} must be text"):
        read_file(path, None, Settings(data_dir=tmp_path))


def test_a_numeric_session_or_speaker_is_kept_as_its_digits():
    line = parse_line('{"user_id": "ana", "text": "tea", "session_id": 42, "speaker": 1001}', None)
    assert (line.turn.session_id, line.turn.speaker) == ("42", "1001")


def test_a_file_saved_with_a_byte_order_mark_and_windows_line_ends_imports(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"user_id": "ana", "text": "I drink green tea"}\r\n'
                     b'{"user_id": "ana", "text": "I live in Lisbon"}\r\n')
    lines = read_file(path, None, Settings(data_dir=tmp_path))
    assert [line.turn.text for line in lines] == ["I drink green tea", "I live in Lisbon"]


def test_a_line_that_is_not_utf8_is_named_with_the_others(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'{"user_id": "ana", "text": "fine"}\n{"user_id": "ana", "text": "caf\xe9"}\n{"user_id": "ana"}\n')
    with pytest.raises(Invalid, match="2 bad line") as refused:
        read_file(path, None, Settings(data_dir=tmp_path))
    assert "line 2: not UTF-8 text" in refused.value.message and "line 3: no text" in refused.value.message


@pytest.mark.parametrize("timestamp", ["March 2024", "8 May", "10:30", "2024", "12", "Tuesday", "May 8 at 1:56 pm"])
def test_a_date_missing_its_year_month_or_day_is_refused_rather_than_completed_from_today(timestamp):
    """Filled in from the day of the import, "March 2024" was 2024-03-05 one day and 2024-03-06
    the next: a wrong date, and a re-run the next day stored every such line again (new ids)."""
    with pytest.raises(ValueError, match=f"unreadable timestamp '{timestamp}': .*year, month and day"):
        parse_line(json.dumps({"user_id": "ana", "text": "hi", "timestamp": timestamp}), None)


@pytest.mark.parametrize("timestamp, expected", [("8 May 2023", datetime(2023, 5, 8)),
                                                 ("2024-02-29T10:30:00+01:00",
                                                  datetime(2024, 2, 29, 10, 30, tzinfo=timezone(timedelta(hours=1))))])
def test_a_whole_date_is_read_as_written(timestamp, expected):
    line = parse_line(json.dumps({"user_id": "ana", "text": "hi", "timestamp": timestamp}), None)
    assert line.turn.timestamp == expected


@pytest.mark.parametrize("timestamp", ["2024-03-10 02:30 EST", "2024-03-10 14:00 CET", "Mar 10 2024 9:15 PST"])
def test_a_zone_named_by_an_abbreviation_dateutil_does_not_know_is_refused_rather_than_dropped(timestamp):
    """dateutil reads "EST" as no zone at all (with a warning on stderr): the turn would be stored
    as if said in UTC, hours off."""
    with pytest.raises(ValueError, match=f"unreadable timestamp '{timestamp}': .*offset"):
        parse_line(json.dumps({"user_id": "ana", "text": "hi", "timestamp": timestamp}), None)
