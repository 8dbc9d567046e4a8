"""Standard input as bytes, line by line (issue #24): the bytes the operator piped in, whatever the locale
or PYTHONIOENCODING says, so a line that is not UTF-8 is a bad line named by its number (exit 2), never a
UnicodeDecodeError while Python decodes the stream for us."""
from __future__ import annotations

import sys
from typing import Iterator


def stdin_lines() -> Iterator[bytes]:
    """The lines of standard input as bytes. A text stream without a byte buffer (a test's StringIO) is
    encoded back as UTF-8, its undecodable bytes (surrogateescape) restored as they came."""
    raw = getattr(sys.stdin, "buffer", None)
    if raw is not None:
        yield from raw
        return
    for line in sys.stdin:
        yield line.encode("utf-8", "surrogateescape")
