"""The one place that makes changes durable. Every recipe leaves either the old state or the new one
after a crash at any step, plus at most a `*.tmp` file that every reader ignores.

  create:   write NAME.tmp, fsync it, rename to NAME, fsync the directory
  append:   write, fsync (fdatasync) before acknowledging; a new file also fsyncs its directory
  truncate: truncate, fsync the file
  vouch:    fsync a file somebody else wrote, before a ledger line claims its bytes
  move:     rename, fsync the destination directory, then the source directory
  remove:   unlink, fsync the directory
"""
from __future__ import annotations

import os

from ..errors import Refused, WalctlError
from ..format.names import TMP_SUFFIX
from .fs import DEFAULT_FS


def create_file(path: str, data, fs=DEFAULT_FS, *, replace: bool = False) -> None:
    """Durable create (or replace, when asked): readers see the old file or the whole new one. `data` is
    bytes or an iterable of byte strings written in order (a large body need not be joined first)."""
    with Staged(path, fs, replace=replace) as st:
        for piece in ([data] if isinstance(data, (bytes, bytearray, memoryview)) else data):
            st.write(piece)
        st.commit()


class Staged:
    """A durable create written piece by piece, whose final name may be chosen at the end:

        with Staged(path) as st:
            st.write(...)           # NAME.tmp, through the seam
            st.commit(final_path)   # fsync, rename, fsync the directory

    Leaving the block without commit (an error, an interrupt) removes NAME.tmp."""

    def __init__(self, path: str, fs=DEFAULT_FS, *, replace: bool = False):
        self.path, self.fs, self.replace = path, fs, replace
        if not replace and fs.exists(path):
            raise Refused(f"{os.path.basename(path)} already exists; walctl never overwrites it", path)
        self.tmp = path + TMP_SUFFIX
        if fs.exists(self.tmp):
            fs.unlink(self.tmp)  # a leftover of an earlier crash: never a reader's file
        self.fd: int | None = fs.open_append(self.tmp, create=True, exclusive=True)
        self.committed: str | None = None

    def write(self, data) -> None:
        self.fs.write(self.fd, data, self.tmp)

    def commit(self, final: str | None = None) -> str:
        final = final or self.path
        if final != self.path and not self.replace and self.fs.exists(final):
            raise Refused(f"{os.path.basename(final)} already exists; walctl never overwrites it", final)
        self.fs.fsync(self.fd, self.tmp)
        self.fs.close(self.fd)
        self.fd = None
        self.fs.rename(self.tmp, final)
        self.fs.fsync_dir(os.path.dirname(final) or ".")
        self.committed = final
        return final

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            self.fs.close(self.fd)
            self.fd = None
        if self.committed is None and self.fs.exists(self.tmp):
            self.fs.unlink(self.tmp)


def file_blocks(path: str, block: int = 1 << 20):
    """The bytes of a file in blocks (a copy source for create_file)."""
    with open(path, "rb") as f:
        while True:
            b = f.read(block)
            if not b:
                return
            yield b


WRITEBACK_BYTES = 8 << 20


def create_file_streamed(path: str, header_size: int, chunks, make_header, fs=DEFAULT_FS, progress=None) -> None:
    """Durable create of a file whose header depends on its body (sizes, digests): the body is written
    while it is produced (`chunks` is an iterator), then the header in the space left at the start. The
    same crash guarantees as create_file: nothing is visible under `path` until the whole file is synced.
    `progress`, if given, is called with each piece's size as it is written."""
    if fs.exists(path):
        raise Refused(f"{os.path.basename(path)} already exists; walctl never overwrites it", path)
    tmp = path + TMP_SUFFIX
    if fs.exists(tmp):
        fs.unlink(tmp)
    fd = fs.open_new(tmp)
    try:
        _write_streamed(fd, tmp, header_size, chunks, make_header, fs, progress)
    except WalctlError:
        # Disk full, an I/O error, a bad header: the process lives on to report it, so it does not leave
        # a half-written .tmp behind (readers ignore one, but it holds the space that ran out). A crash
        # cannot get here; its .tmp is removed by the next create.
        fs.close(fd)
        fd = None
        if fs.exists(tmp):
            fs.unlink(tmp)
        raise
    finally:
        if fd is not None:
            fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def _write_streamed(fd: int, tmp: str, header_size: int, chunks, make_header, fs, progress=None) -> None:
    fs.write(fd, bytes(header_size), tmp)
    written = flushed = header_size
    for piece in chunks:
        fs.write(fd, piece, tmp)
        written += len(piece)
        if progress is not None:
            progress(len(piece))
        if written - flushed >= WRITEBACK_BYTES:
            # While the body is still being produced: the final fsync of a 400 MB checkpoint
            # otherwise waits ~0.25 s here for writes that could have gone out meanwhile.
            fs.start_writeback(fd, flushed, written - flushed)
            flushed = written
    header = make_header()
    if len(header) != header_size:
        raise ValueError(f"header of {len(header)} bytes, {header_size} reserved")
    fs.pwrite(fd, header, 0, tmp)
    fs.fsync(fd, tmp)


def append(path: str, data: bytes, fs=DEFAULT_FS, sync: bool = True) -> None:
    """Appends and syncs; creates the file (and syncs its directory) when it is new. `sync=False`: a hint
    whose loss in a crash costs nothing (the sequence index's points): appended, never synced."""
    new = not fs.exists(path)
    fd = fs.open_append(path, create=True)
    try:
        fs.write(fd, data, path)
        if sync:
            fs.fsync(fd, path)
    finally:
        fs.close(fd)
    if new and sync:
        fs.fsync_dir(os.path.dirname(path) or ".")


def sync_file(path: str, fs=DEFAULT_FS) -> None:
    """Makes a file written by someone else durable before walctl vouches for its bytes (a seal)."""
    fs.fsync_path(path)


def truncate(path: str, size: int, fs=DEFAULT_FS) -> None:
    fs.truncate(path, size)
    fs.fsync_path(path)


def move(src: str, dst: str, fs=DEFAULT_FS) -> None:
    """Renames without ever replacing an existing file (callers hold the directory's lock)."""
    if fs.exists(dst):
        raise Refused(f"{dst} already exists; walctl never overwrites it", dst)
    fs.rename(src, dst)
    dst_dir, src_dir = os.path.dirname(dst) or ".", os.path.dirname(src) or "."
    fs.fsync_dir(dst_dir)
    if os.path.abspath(src_dir) != os.path.abspath(dst_dir):
        fs.fsync_dir(src_dir)


def adopt(src: str, dst: str, fs=DEFAULT_FS) -> None:
    """Durably puts a finished file that was written without syncs (a download into a staging
    directory) at dst: fsync it, then move it (never over an existing file)."""
    fd = fs.open_append(src)
    try:
        fs.fsync(fd, src)
    finally:
        fs.close(fd)
    move(src, dst, fs)


def move_across(src: str, dst: str, fs=DEFAULT_FS) -> None:
    """Moves a file to another directory, possibly on another file system: a rename where it can be,
    else a durable copy and only then the removal of the source."""
    if fs.same_device(src, os.path.dirname(dst) or "."):
        move(src, dst, fs)
        return
    with fs.map_read(src) as buf:
        data = bytes(buf)
    create_file(dst, data, fs)
    remove(src, fs)


def remove(path: str, fs=DEFAULT_FS) -> None:
    fs.unlink(path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def remove_dir(path: str, fs=DEFAULT_FS) -> None:
    """Removes an empty directory and makes that durable."""
    fs.rmdir(path)
    fs.fsync_dir(os.path.dirname(os.path.abspath(path)))


def make_dir(path: str, fs=DEFAULT_FS) -> None:
    """Creates a directory (if missing) and makes its entry durable."""
    if fs.exists(path):
        return
    fs.mkdir(path)
    fs.fsync_dir(os.path.dirname(os.path.abspath(path)))
