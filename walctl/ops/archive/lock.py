"""One follower per archive namespace (issue #24): `archive push --follow` holds `<ns>/LOCK.json` while it
ships. Rules: docs/format.md section 13 ("One follower per namespace").

Two followers of one namespace used to race on the same uploads and manifest (the second died on the
first's `.tmp`, the manifest went missing for a moment). The lock is an object written with a conditional
write (store/objcond.py: S3 If-None-Match / If-Match; O_EXCL and a winning rename on file://), so exactly
one starter creates it:

  start       create LOCK.json if absent; else read it: a live holder -> refuse (exit 6, naming it);
              a stale one -> take it over (a conditional replace of the version judged stale) and say so
  heartbeat   every `heartbeat_s`, the holder rewrites it if it is still its own version (else it lost
              the lock: it stops, exit 6, before shipping anything more)
  stop        the holder deletes it

Stale: the holder is gone -- on this host, its process no longer exists; on any host, no heartbeat for
STALE_BEATS heartbeats. A lock that does not parse (half-written, damaged) counts as held until it is as
old as a stale one (its object's own time).
"""
from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import NamedTuple

from ...version import __version__
from ...errors import REASON_LOCKED, EnvironmentProblem, WalctlError
from ...format.fields import COUNT, ISO, STR, Field, check, iso_to_ms
from .objects import LOCK

LOCK_SCHEMA = "walctl.archive-lock/1"
STALE_BEATS = 6  # heartbeats missed before a lock whose holder cannot be asked is stale
MIN_HEARTBEAT_S = 5.0

_SPEC = {"schema": Field(STR), "holder": Field(STR), "host": Field(STR), "pid": Field(COUNT), "token": Field(STR),
         "started_at": Field(ISO), "heartbeat_at": Field(ISO), "heartbeat_s": Field(COUNT)}


class Holder(NamedTuple):
    holder: str  # "host pid N"
    host: str | None
    pid: int | None
    token: str | None
    beat_ms: int | None  # the last heartbeat (ms since the epoch); None: unknown
    problem: str | None = None  # why the lock object could not be read


def _iso(ms: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms) % 1000:03d}Z"


def read_holder(raw: bytes, modified_s: float | None) -> Holder:
    """The lock's holder, typed; a lock that is not one is held by "unknown" since its object's time."""
    from ...format.jsonload import loads

    try:
        doc = loads(raw, allow_lone_surrogates=False)
        why = check(doc, _SPEC, "a lock object") or (None if doc["schema"] == LOCK_SCHEMA else "another schema")
    except ValueError as e:
        why = str(e)
    if why:
        beat = None if modified_s is None else int(modified_s * 1000)
        return Holder(f"an unreadable {LOCK} ({why})", None, None, None, beat, why)
    return Holder(doc["holder"], doc["host"], doc["pid"], doc["token"], iso_to_ms(doc["heartbeat_at"]))


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists (another user's): alive
    return False


class NamespaceLock:
    """The follower lock of one namespace. `wall()` is seconds since the epoch (a test passes its own)."""

    def __init__(self, store, ns: str, heartbeat_s: float = MIN_HEARTBEAT_S, wall=time.time,
                 host: str | None = None, pid: int | None = None):
        self.store, self.ns, self.wall = store, ns, wall
        self.key = f"{ns}/{LOCK}"
        self.heartbeat_s = max(1, int(round(heartbeat_s)))
        self.host = host or socket.gethostname()
        self.pid = os.getpid() if pid is None else pid
        self.token = uuid.uuid4().hex
        self.started_ms = int(wall() * 1000)
        self.tag: str | None = None
        self.beat_at = 0.0
        self.taken = False

    @property
    def holder(self) -> str:
        return f"{self.host} pid {self.pid}"

    def _doc(self) -> bytes:
        now_ms = self.wall() * 1000
        return (json.dumps({"schema": LOCK_SCHEMA, "walctl_version": __version__, "namespace": self.ns,
                            "holder": self.holder, "host": self.host, "pid": self.pid, "token": self.token,
                            "started_at": _iso(self.started_ms), "heartbeat_at": _iso(now_ms),
                            "heartbeat_s": self.heartbeat_s}, sort_keys=True) + "\n").encode()

    def stale_why(self, h: Holder) -> str | None:
        """Why the holder is gone, or None while it may be alive."""
        if h.host == self.host and h.pid is not None and h.pid != self.pid and _process_gone(h.pid):
            return f"process {h.pid} no longer runs on this host"
        age_s = None if h.beat_ms is None else self.wall() - h.beat_ms / 1000
        if age_s is not None and age_s > STALE_BEATS * self.heartbeat_s:
            return f"no heartbeat for {age_s:.0f} s (stale after {STALE_BEATS} x {self.heartbeat_s} s)"
        return None

    def acquire(self) -> str | None:
        """Takes the lock. Returns what was said when a stale lock was taken over (else None); raises
        EnvironmentProblem (exit 6, reason locked) naming a live holder."""
        for _ in range(3):  # the lock may vanish or change between the steps: look again
            doc = self._doc()
            if self.store.put_new(self.key, doc):
                self._held(doc)
                return None
            got = self.store.read_tagged(self.key)
            if got is None:
                continue  # released meanwhile
            raw, tag = got
            info = self.store.head(self.key)
            h = read_holder(raw, info.modified if info is not None else None)
            why = self.stale_why(h)
            if why is None:
                since = "" if h.beat_ms is None else f"; last heartbeat {max(0.0, self.wall() - h.beat_ms / 1000):.0f} s ago"
                raise EnvironmentProblem(f"namespace {self.ns} is already followed by {h.holder}{since}: one follower "
                                         f"per namespace (a stale lock is taken over after {STALE_BEATS} missed "
                                         f"heartbeats, or at once when its process is gone from this host)",
                                         f"{self.store.url}/{self.key}", kind=REASON_LOCKED)
            if self.store.take_over(self.key, doc, tag, self.token):
                self._held(doc)
                return f"{self.ns}: took over the follower lock of {h.holder}: {why}"
        raise EnvironmentProblem(f"namespace {self.ns}: another follower is taking the lock at the same moment",
                                 f"{self.store.url}/{self.key}", kind=REASON_LOCKED)

    def _held(self, doc: bytes) -> None:
        got = self.store.read_tagged(self.key)
        if got is None or got[0] != doc:
            raise EnvironmentProblem(f"namespace {self.ns}: the follower lock changed under us",
                                     f"{self.store.url}/{self.key}", kind=REASON_LOCKED)
        self.tag, self.beat_at = got[1], self.wall()

    def beat(self, force: bool = False) -> None:
        """Refreshes the heartbeat when one is due; raises EnvironmentProblem when the lock is no longer
        ours (taken over after we stalled): the caller stops shipping."""
        if self.tag is None or (not force and self.wall() - self.beat_at < self.heartbeat_s):
            return
        doc = self._doc()
        if not self.store.replace_if(self.key, doc, self.tag):
            got = self.store.read_tagged(self.key)
            other = read_holder(got[0], None).holder if got else "nobody (deleted)"
            self.tag = None
            raise EnvironmentProblem(f"namespace {self.ns}: lost the follower lock (now held by {other}); stopped",
                                     f"{self.store.url}/{self.key}", kind=REASON_LOCKED)
        self._held(doc)

    def hold(self) -> list[str]:
        """Once per poll: the lock taken at the first call (what was said about a stale lock taken over,
        as a list of warnings), the heartbeat refreshed when due after."""
        if not self.taken:
            said = self.acquire()
            self.taken = True
            return [said] if said else []
        self.beat()
        return []

    def release(self, quietly: bool = False) -> None:
        """Deletes the lock if it is still ours. `quietly`: on the way out after a failure, a store error
        here is not the one to report (the lock then goes stale)."""
        if self.tag is None:
            return
        try:
            got = self.store.read_tagged(self.key)
            if got is not None and got[1] == self.tag:
                self.store.delete(self.key)
        except WalctlError:
            if not quietly:
                raise
        self.tag = None
