"""Durations and times, parsed one way for every option (walctl/cli/units.py, issue #26)."""
from __future__ import annotations

import pytest

from walctl.cli.units import parse_duration, parse_time
from walctl.errors import UsageError


@pytest.mark.parametrize("text,seconds", [
    ("500ms", 0.5), ("1s", 1.0), ("2m", 120.0), ("1h", 3600.0), ("1d", 86400.0), ("0.5", 0.5), ("3", 3.0),
    (" 2M ", 120.0), ("0", 0.0), ("1.5s", 1.5), ("250MS", 0.25),
])
def test_durations_in_every_spelling(text, seconds):
    assert parse_duration(text, "--interval") == pytest.approx(seconds)


@pytest.mark.parametrize("text,says", [
    ("abc", "not a duration"), ("", "not a duration"), ("1x", "not a duration"), ("ms", "not a duration"),
    ("nan", "not a duration"), ("inf", "not a duration"), ("1_0", "not a duration"), ("١٢", "not a duration"),
    ("-1", "not negative"), ("-5ms", "not negative"), ("1e400", "1,000 years"), ("99999999999d", "1,000 years"),
])
def test_bad_durations_are_one_line_naming_the_option(text, says):
    with pytest.raises(UsageError) as e:
        parse_duration(text, "--timeout")
    assert says in e.value.reason and "--timeout" in e.value.reason and "\n" not in e.value.reason


def test_duration_bounds():
    assert parse_duration("10ms", "--interval", low=0.01, high=60) == pytest.approx(0.01)
    for text, says in (("5ms", "at least 10ms"), ("61s", "at most 60s"), ("2m", "at most 60s")):
        with pytest.raises(UsageError, match=says):
            parse_duration(text, "--interval", low=0.01, high=60)
    with pytest.raises(UsageError, match="more than 0"):
        parse_duration("0", "--interval", zero=False)


def test_times_as_epoch_ms_or_iso():
    assert parse_time(None, "--since") is None
    assert parse_time("1700000000000", "--since") == 1700000000000
    assert parse_time("1970-01-01T00:00:01Z", "--since") == 1000
    assert parse_time("1970-01-01T00:00:01", "--since") == 1000  # no zone: UTC
    assert parse_time("1970-01-01T01:00:01+01:00", "--since") == 1000
    for bad in ("yesterday", "１７", "2026-13-01"):
        with pytest.raises(UsageError, match="--until .*neither epoch milliseconds nor an ISO-8601 time"):
            parse_time(bad, "--until")


def test_follow_takes_durations_on_the_command_line(tmp_path, cli):
    d = tmp_path / "d"
    assert cli("write", d, "--type", "REMEMBER", "--id", "a", "--payload", "x").code == 0
    for interval in ("1s", "500ms", "0.5"):  # `replay --interval 1s` was "not a valid float"
        r = cli("replay", d, "--follow", "--interval", interval, "--to", "1", "--timeout", "1m")
        assert r.code == 0 and r.out.count("\n") == 1, (interval, r.err)
        r = cli("inspect", d, "--follow", "--interval", interval, "--to", "1", "--timeout", "60", "--jsonl")
        assert r.code == 0 and r.out.count("\n") == 1, (interval, r.err)
    r = cli("replay", d, "--follow", "--interval", "5ms")
    assert r.code == 2 and "--interval '5ms': at least 10ms" in r.err
