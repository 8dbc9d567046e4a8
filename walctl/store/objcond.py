"""Conditional writes on the object stores (issue #24: one follower per archive namespace, whose lock is
an object: ops/archive/lock.py). Each store gets the same four calls:

  put_new(key, data)                 create only if absent                 S3: If-None-Match: *   file: O_EXCL
  read_tagged(key)                   (bytes, tag of this version) or None  S3: the ETag           file: SHA-256
  replace_if(key, data, tag)         replace that version (the holder)     S3: If-Match           file: check, rename
  take_over(key, data, tag, token)   replace a stale holder's version      S3: If-Match           file: rename away,
                                                                                                  check, O_EXCL
On S3 each is one request the service decides; on a file system the rename that takes a stale lock away
is what only one taker can win.
"""
from __future__ import annotations

import hashlib
import os

from ..errors import EnvironmentProblem
from . import durable


class FileConditional:
    def put_new(self, key: str, data: bytes) -> bool:
        """Creates the object only if there is none (O_EXCL on its final name); False when one exists.
        A reader may meet it empty or half-written for a moment: lock readers treat that as held."""
        dst = self._path(key)
        self._make_parents(dst)
        try:
            fd = self.fs.open_append(dst, create=True, exclusive=True)
        except EnvironmentProblem:
            if os.path.lexists(dst):
                return False
            raise
        try:
            self.fs.write(fd, data, dst)
            self.fs.fsync(fd, dst)
        finally:
            self.fs.close(fd)
        self.fs.fsync_dir(os.path.dirname(dst))
        return True

    def read_tagged(self, key: str) -> tuple[bytes, str] | None:
        """(bytes, tag) of an object, the tag naming this version (here: its SHA-256)."""
        data = self.get_bytes(key)
        return None if data is None else (data, hashlib.sha256(data).hexdigest())

    def replace_if(self, key: str, data: bytes, tag: str) -> bool:
        """Replaces the object (atomically: tmp, fsync, rename) when it is still the version `tag`; False
        otherwise. The check and the rename are two steps here: only the lock's holder calls this."""
        now = self.read_tagged(key)
        if now is None or now[1] != tag:
            return False
        self.put_bytes(key, data)
        return True

    def take_over(self, key: str, data: bytes, tag: str, token: str) -> bool:
        """Replaces version `tag` by `data` when no one else does it first: the object is renamed away
        (one rename wins), checked, then created anew (O_EXCL). False when another taker won."""
        dst = self._path(key)
        grabbed = f"{dst}.{token}{durable.TMP_SUFFIX}"  # a .tmp: never listed, never an object
        try:
            self.fs.rename(dst, grabbed)
        except EnvironmentProblem:
            return False  # gone: another taker renamed it first
        with open(grabbed, "rb") as f:
            held = f.read()
        ours = hashlib.sha256(held).hexdigest() == tag
        if not ours:  # refreshed meanwhile: its holder lives; put it back (unless someone else is in)
            self.put_new(key, held)
        durable.remove(grabbed, self.fs)
        return ours and self.put_new(key, data)




class S3Conditional:
    def _conditional_put(self, key: str, data: bytes, **cond) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **cond)
        except self._errors as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey"):
                return False
            raise self._fail(e, key) from None
        return True

    def put_new(self, key: str, data: bytes) -> bool:
        return self._conditional_put(key, data, IfNoneMatch="*")

    def read_tagged(self, key: str) -> tuple[bytes, str] | None:
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return r["Body"].read(), r["ETag"]
        except self._errors as e:
            if missing(e):
                return None
            raise self._fail(e, key) from None

    def replace_if(self, key: str, data: bytes, tag: str) -> bool:
        return self._conditional_put(key, data, IfMatch=tag)

    def take_over(self, key: str, data: bytes, tag: str, token: str) -> bool:
        return self._conditional_put(key, data, IfMatch=tag)


def missing(e) -> bool:
    return getattr(e, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


