"""What the sequence index's tests (test_seqindex*.py, test_seqpoints.py) share: the readers' output without
any hint to compare with, a report to read the index's state from, and the changes they make to files."""
from __future__ import annotations

import json
import os
import shutil

from walctl.store.seqindex import index_path
from walctl.store.seqpoints import points_path


def without_hints(outputs, d: str, tmp_path) -> list:
    """`outputs(path)` (a list of tuples) for a copy of `d` with neither index nor points: the scan, with
    the copy's path written back as `d` in every string."""
    plain = str(tmp_path / "plain")
    shutil.copytree(d, plain)
    for p in (index_path(plain), points_path(plain)):
        if os.path.exists(p):
            os.unlink(p)
    got = outputs(plain)
    shutil.rmtree(plain)
    return [tuple(x.replace(plain, d) if isinstance(x, str) else x for x in row) for row in got]


def seq_outputs(cli, d: str, seq: int) -> list:
    """What the readers say about `seq`: replay after it (and a window to it), inspect --seq of it."""
    out = []
    for args in (("replay", d, "--after", seq - 1), ("replay", d, "--after", max(seq - 300, 0), "--to", seq),
                 ("inspect", d, "--seq", seq)):
        r = cli(*args)
        out.append((args[0], r.code, r.out))
    return out


def seq_scan(cli, d: str, tmp_path, seq: int) -> list:
    """seq_outputs of `d` without its index and points."""
    return without_hints(lambda p: seq_outputs(cli, p, seq), d, tmp_path)


def replay_report(cli, d: str, after: int) -> tuple:
    """(replay --after's JSON report, the run) for the index's state and findings."""
    r = cli("replay", d, "--after", after, "--report", "-", "--quiet")
    return json.loads(r.err[r.err.index("{"):]), r


def touch(path: str) -> None:
    """The file's mtime a second later, its bytes as they were."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def spoil_max_ts(d: str) -> None:
    """The index's first max_ts changed without its CRC: a damaged line."""
    with open(index_path(d), "rb") as f:
        data = f.read()
    with open(index_path(d), "wb") as f:
        f.write(data.replace(b'"max_ts":', b'"max_ts":1', 1))


def json_lines(path: str) -> list[dict]:
    """The objects of a file of JSON lines (the index's, the points')."""
    with open(path, "rb") as f:
        return [json.loads(x) for x in f.read().splitlines() if x.strip()]


def write_json_lines(path: str, objs: list[dict], fix_crc: bool = True) -> None:
    """`objs` as compact JSON lines, each with the CRC-32C walctl gives it (unless not `fix_crc`)."""
    from walctl.format.ledger import crc32c

    out = b""
    for o in objs:
        o = dict(o)
        if fix_crc:
            o.pop("crc32c", None)
            o["crc32c"] = f"{crc32c(json.dumps(o, sort_keys=True, separators=(',', ':')).encode()):08x}"
        out += json.dumps(o, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    with open(path, "wb") as f:
        f.write(out)


def edit_index_line(file_no: int, **fields):
    """A corruption: index line `file_no` with `fields` changed, its CRC made good again."""
    def corrupt(d):
        objs = json_lines(index_path(d))
        objs[file_no].update(fields)
        write_json_lines(index_path(d), objs)
    return corrupt
