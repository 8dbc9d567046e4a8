"""Steps 8, 9 and 10 of a large checkpoint body in one pass, for restore and recover. Pure.

Before: SHA-256 of the body and the whole zstd frame inflated side by side (both outside the GIL), then
msgpack decoding of the inflated bytes (in the GIL): the decode waited for the inflate. Here one thread
hashes and inflates the body a slice at a time and hands the output on, while the caller decodes each
piece as it arrives (msgpack's Unpacker resumes where the last piece ended), so the inflate runs under
the decode instead of before it, and the inflated bytes are never held whole.

Bounds: the frame declared its content size, equal to the header's, under the caller's limit (checked
first, format/checkpoint.py); output past that size stops the inflate; at most QUEUE_PIECES inflated
pieces wait for the decoder. The caller judges the outcome in step order (a body whose SHA-256 fails is
step 8 whatever the rest did).
"""
from __future__ import annotations

import hashlib
import queue
import threading
from typing import NamedTuple

from .canonical import unpack_pieces

SLICE_BYTES = 256 << 10  # compressed bytes per step (inflates to a few MiB for a typical state)
QUEUE_PIECES = 8


class Streamed(NamedTuple):
    digest: str | None  # SHA-256 of the body (hex)
    inflate_error: str | None  # step 9
    decode_error: str | None  # step 10 (not exactly one msgpack value)
    value: object  # the decoded value when neither failed


class _Inflater(threading.Thread):
    """Hashes and inflates `body` slice by slice, putting each output piece on `pieces`, then None."""

    def __init__(self, body, size: int):
        super().__init__(name="walctl-checkpoint-inflate", daemon=True)
        self.body, self.size = body, size
        self.pieces: queue.Queue = queue.Queue(QUEUE_PIECES)
        self.stop = threading.Event()
        self.digest: str | None = None
        self.error: str | None = None

    def run(self) -> None:
        import zstandard

        sha = hashlib.sha256()
        body, total = self.body, 0
        try:
            dobj = zstandard.ZstdDecompressor().decompressobj()
            for pos in range(0, len(body), SLICE_BYTES):
                piece = body[pos:pos + SLICE_BYTES]
                sha.update(piece)
                if self.error is not None or self.stop.is_set():
                    continue  # the digest is still wanted (step 8 comes first)
                try:
                    out = dobj.decompress(piece)
                except zstandard.ZstdError as e:
                    self.error = f"zstd frame does not decode: {e}"
                    continue
                total += len(out)
                if total > self.size:
                    self.error = f"zstd frame inflates past uncompressed_size {self.size}"
                elif out:
                    self._put(out)
            if self.error is not None or self.stop.is_set():
                pass  # failed already, or the decoder gave up first (its error is the one to report)
            elif not dobj.eof:
                self.error = "zstd frame ends before its end (truncated)"
            elif total != self.size:
                self.error = f"zstd frame size {total} differs from uncompressed_size {self.size}"
            self.digest = sha.hexdigest()
        finally:
            self._put(None)

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.pieces.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def output(self):
        while True:
            piece = self.pieces.get()
            if piece is None:
                return
            yield piece


def digest_inflate_decode(body, size: int) -> Streamed:
    worker = _Inflater(body, size)
    worker.start()
    value, decode_error = None, None
    try:
        value = unpack_pieces(worker.output(), size)
    except ValueError as e:
        decode_error = str(e)
    finally:
        worker.stop.set()  # the decoder is done: anything still coming is not wanted (but the digest is)
        worker.join()
    if worker.error is not None:  # a decode error caused by a bad inflate is the inflate's
        return Streamed(worker.digest, worker.error, None, None)
    return Streamed(worker.digest, None, decode_error, value if decode_error is None else None)
