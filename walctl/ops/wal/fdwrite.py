"""Writing replay's encoded pieces to a file descriptor (the parent's output, or a worker's)."""
from __future__ import annotations

import os
from typing import Callable

from ...format import events as ev


def write_pieces_to_fd(fd: int) -> Callable[[list], None]:
    """An `out` for a file descriptor: writev in batches of byte strings, finishing partial writes
    (a descriptor takes a chunk's worth without it being joined first)."""
    iov_max = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)

    def write(pieces: list) -> None:
        for batch in ev.expand_pieces(pieces):
            _writev(batch)

    def _writev(pieces: list) -> None:
        for i in range(0, len(pieces), iov_max):
            batch = pieces[i:i + iov_max]
            n = os.writev(fd, batch)
            total = sum(map(len, batch))
            if n < total:  # a pipe took part of it: finish byte by byte-range
                rest = memoryview(b"".join(batch))[n:]
                while rest:
                    rest = rest[os.write(fd, rest):]

    return write
