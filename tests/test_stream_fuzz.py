"""Any bytes offered as a replay stream, and any JSON offered as a merge state: applied, or refused with
a WalctlError (a one-line error and a documented exit code), never another exception; a refused
stream leaves exactly the events before the bad item, all of them valid."""
from __future__ import annotations

import io
import json
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from walctl.errors import WalctlError
from walctl.format import events as ev
from walctl.ops.wal.importer import import_stream, local_hwm, read_stream

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
GOOD = [ev.Event(s, s % 6, b"m%d" % s, 1795300000000 + s, b"p" * (s % 9)) for s in range(1, 6)]
PREFIXES = {
    "sync": b"".join(ev.encode_sync(e) for e in GOOD),
    "msgpack": b"".join(ev.encode_msgpack(e) for e in GOOD),
    "jsonl": b"".join(json.dumps({"sequence": e.sequence, "type_ordinal": e.type_ordinal,
                                  "memory_id_hex": e.memory_id.hex(), "timestamp_ms": e.timestamp_ms,
                                  "payload_hex": e.payload.hex()}).encode() + b"\n" for e in GOOD),
}


def apply(directory: str, data: bytes):
    form, items = read_stream(io.BufferedReader(io.BytesIO(data)), max_payload=1 << 16)
    return import_stream(directory, items, form, sync="none")


@FAST
@given(st.sampled_from(sorted(PREFIXES)), st.integers(0, 400), st.binary(max_size=300))
def test_a_good_stream_then_anything(form, cut, junk):
    data = PREFIXES[form]
    data = data[:cut % (len(data) + 1)] + junk
    with tempfile.TemporaryDirectory() as d:
        target = d + "/wal"
        try:
            apply(target, data)
        except WalctlError as e:
            assert e.exit_code in (2, 3, 4, 5, 6, 7), e
        hwm = local_hwm(target)
        assert 0 <= hwm  # whatever got in is a clean prefix of 1..n (verify would say otherwise)
        from walctl.ops.wal.verify import verify_path

        if hwm:
            rep = verify_path(target)
            assert rep.exit_code == 0 and rep.first_sequence == 1 and rep.last_sequence == hwm


@FAST
@given(st.binary(max_size=200))
def test_any_bytes(data):
    with tempfile.TemporaryDirectory() as d:
        try:
            apply(d + "/wal", data)
        except WalctlError as e:
            assert e.exit_code in (2, 3, 4, 5, 6, 7)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=12)


@FAST
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_any_memory_state_json_is_loaded_or_refused(memory):
    from walctl.ops.wal.merge import load_state

    doc = {"schema": "walctl.memory-state/1", "memories": {"m": memory}}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(doc, f)
        f.flush()
        try:
            load_state(f.name)
        except WalctlError as e:
            assert e.exit_code == 2
