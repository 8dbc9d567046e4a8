"""A helper process that fdatasyncs for a group-commit writer (sync=batch on the real file system).

Why a process and not a thread: a thread's fdatasync runs without the GIL, but the thread needs the GIL
back to say it is done, and gets it only when the appending thread next blocks or after the 5 ms switch
interval. Every group then costs two thread handoffs, measured here at 50-100 us a group of 100 records:
about 200k records/s instead of about 330k. The helper answers through its socket the moment fdatasync
returns, and the writer reads the answer when it next hands off a group (or when durable_sequence is read).

Protocol, over a socket pair that is the helper's standard input and output:
  to it      b"F" with a descriptor       (SCM_RIGHTS) the writer's own descriptor of the file; later syncs
                                          are of it (never a path: the file is the one the writer opened
                                          from its target's descriptor, whatever its name leads to now)
             b"S" + u64 ticket            fdatasync the file, then answer
  from it    i32 errno (0: synced) + u64 ticket, in request order
A sync covers every byte written to the file before its request was sent: the kernel flushes the inode's
dirty pages whichever descriptor wrote them. The helper ignores terminal signals (its writer decides when
it ends) and exits when its standard input closes, so it never outlives its writer.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import time

_REPLY = struct.Struct(">iQ")
HELLO = b"walctl-sync/1\n"
START_TIMEOUT_S = 10.0
# A process running many writers (one per agent session, say) gets helpers for the first few only, and
# the rest sync with their commit threads: each helper is a small interpreter (~10 MB).
MAX_LIVE = 4
_live = [0]
_live_lock = threading.Lock()
_CHILD = "HELLO = %r\n" % HELLO + r"""
import os, signal, socket, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
s, w = socket.socket(fileno=sys.stdin.fileno()), sys.stdout.fileno()
os.write(w, HELLO)
sync = getattr(os, "fdatasync", os.fsync)
fd, err = None, 9
def read_exact(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise SystemExit(0)
        b += c
    return b
while True:
    op, fds, _, _ = socket.recv_fds(s, 1, 1)  # (an op's first byte carries its descriptor)
    if not op:
        raise SystemExit(0)
    if op == b"F":
        if fd is not None:
            os.close(fd)
        fd, err = (fds[0], 0) if fds else (None, 9)
    else:
        ticket = read_exact(8)
        code = err
        if fd is not None:
            try:
                sync(fd)
            except OSError as e:
                code = e.errno or 5
        os.write(w, struct.pack(">i", code) + ticket)
"""


class HelperGone(Exception):
    """The helper stopped answering: its writer syncs by itself from here on."""


def _claim() -> bool:
    with _live_lock:
        if _live[0] >= MAX_LIVE:
            return False
        _live[0] += 1
        return True


def _release() -> None:
    with _live_lock:
        _live[0] -= 1


class SyncHelper:
    def __init__(self, fd: int):
        """`fd`: the writer's descriptor of the file to sync (the helper gets its own copy of it)."""
        import socket

        self._claimed = False
        if not _claim():
            raise HelperGone(f"{MAX_LIVE} sync helpers already run in this process")
        self._claimed = True
        try:
            self._start(fd, socket)
        except BaseException:
            self._unclaim()
            raise

    def _start(self, fd: int, socket) -> None:
        # A socket pair rather than pipes: a send with MSG_NOSIGNAL to a helper that died fails with EPIPE
        # instead of raising SIGPIPE, which the CLI leaves at its default (it would kill the writer).
        self._sock, theirs = socket.socketpair()
        try:
            # -I -S: no site packages, no PYTHON* variables: nothing of the caller's environment runs in it
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _CHILD], stdin=theirs, stdout=theirs,
                                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
        finally:
            theirs.close()
        self._nosignal = getattr(socket, "MSG_NOSIGNAL", 0)
        self._partial = b""
        self.outstanding: list[tuple[int, float]] = []  # (ticket, when asked), oldest first
        # sys.executable is not always a Python that runs -c (an embedding application): no greeting,
        # no helper
        self._sock.settimeout(START_TIMEOUT_S)
        try:
            hello = b""
            while len(hello) < len(HELLO) and HELLO.startswith(hello):
                got = self._sock.recv(len(HELLO) - len(hello))
                if not got:
                    break
                hello += got
        except OSError:
            hello = b""
        if hello != HELLO:
            self._stop()
            raise HelperGone("the sync helper did not start")
        self.open(fd)

    def open(self, fd: int) -> None:
        """Later syncs are of this file: its descriptor is passed, never its name."""
        import socket

        try:
            self._sock.setblocking(True)
            socket.send_fds(self._sock, [b"F"], [fd])
        except OSError as e:  # EPIPE: it died
            raise HelperGone(str(e)) from None

    def request(self, ticket: int) -> None:
        self._send(b"S" + struct.pack(">Q", ticket))
        self.outstanding.append((ticket, time.monotonic()))

    def answers(self, block: bool, until: int = 0) -> list[tuple[int, int]]:
        """(errno, ticket) for each request answered since the last call; with block, waits until at most
        `until` requests are still outstanding."""
        out = []
        while self.outstanding:
            try:
                self._sock.setblocking(block and len(self.outstanding) > until)
                data = self._sock.recv(4096)
            except BlockingIOError:
                break
            except OSError as e:
                raise HelperGone(str(e)) from None
            if not data:
                raise HelperGone("the sync helper exited")
            data = self._partial + data
            whole = len(data) - len(data) % _REPLY.size
            self._partial = data[whole:]
            for pos in range(0, whole, _REPLY.size):
                out.append(_REPLY.unpack_from(data, pos))
                self.outstanding.pop(0)
        return out

    def close(self) -> None:
        self._stop()
        self._unclaim()

    def _stop(self) -> None:
        self._sock.close()  # the helper reads end of file and exits
        try:
            self.proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _unclaim(self) -> None:
        if self._claimed:
            self._claimed = False
            _release()

    def __del__(self) -> None:  # a writer dropped without close: its helper ends with the socket
        try:
            self._sock.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
        self._unclaim()

    def _send(self, msg: bytes) -> None:
        try:
            self._sock.setblocking(True)
            self._sock.sendall(msg, self._nosignal)
        except OSError as e:  # EPIPE: it died
            raise HelperGone(str(e)) from None
