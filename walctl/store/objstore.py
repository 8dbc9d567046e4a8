"""Object storage behind one small interface: a local directory (`file://`, no server) or any
S3-compatible service (`s3://bucket/prefix`, through boto3, imported only when used).

Keys are `/`-separated and relative to the destination's root. Every put is whole-object: readers see
the old object or the new one (S3 replaces objects atomically; the file store writes NAME.tmp, fsyncs
it, renames it and fsyncs the directory). `put` returns what the store then holds (size, and the
SHA-256 when the store can vouch for it); callers verify against what they sent.
"""
from __future__ import annotations

import hashlib
import os
from typing import BinaryIO, Iterator, NamedTuple
from urllib.parse import urlparse

from ..errors import EnvironmentProblem, UsageError
from ..format.names import is_plain_name
from . import durable
from .fs import DEFAULT_FS

COPY_BLOCK = 1 << 20


class ObjectInfo(NamedTuple):
    key: str
    size: int
    sha256: str | None  # the SHA-256 the service computed and checked itself, when it says
    modified: float | None = None
    md5: str | None = None  # S3's ETag of a single-part upload: the MD5 of the bytes it stored


def sha256_file(path: str) -> str:
    return file_hashes(path)[0]


def file_hashes(path: str, md5: bool = False) -> tuple[str, str | None]:
    """(sha256, md5 or None) in one pass; hashlib releases the GIL, so threads hash in parallel."""
    h = hashlib.sha256()
    m = hashlib.md5() if md5 else None
    with open(path, "rb") as f:
        while True:
            block = f.read(COPY_BLOCK)
            if not block:
                return h.hexdigest(), m.hexdigest() if m else None
            h.update(block)
            if m:
                m.update(block)


class FileStore:
    """`file:///path`: objects are files under a root directory."""

    def __init__(self, root: str):
        self.root = root
        self.url = "file://" + root
        self.fs = DEFAULT_FS.beneath(root)  # a key never leads outside the root, nor through a link

    def _path(self, key: str) -> str:
        parts = key.split("/")
        if not all(is_plain_name(p) for p in parts):
            raise UsageError(f"bad object key {key!r}")
        return os.path.join(self.root, *parts)

    def _make_parents(self, dst: str) -> None:
        d, missing = os.path.dirname(dst), []
        while not os.path.isdir(d) and d != self.root:
            d, part = os.path.split(d)
            missing.append(part)
        for d in [self.root] + [os.path.join(d, *reversed(missing[i:])) for i in range(len(missing) - 1, -1, -1)]:
            try:
                durable.make_dir(d, self.fs)
            except EnvironmentProblem:
                if not os.path.isdir(d):  # else another upload thread created it first
                    raise

    def available(self) -> bool:
        return os.path.isdir(self.root) and os.access(self.root, os.W_OK)

    def put_file(self, key: str, path: str, sha256: str, metadata: dict | None = None) -> ObjectInfo:
        dst = self._path(key)
        self._make_parents(dst)
        durable.create_file(dst, durable.file_blocks(path, COPY_BLOCK), self.fs, replace=True)
        return self.head(key, want_sha=True)

    def put_bytes(self, key: str, data: bytes) -> None:
        dst = self._path(key)
        self._make_parents(dst)
        durable.create_file(dst, data, self.fs, replace=True)

    def head(self, key: str, want_sha: bool = False) -> ObjectInfo | None:
        p = self._path(key)
        try:
            st = os.stat(p)
        except FileNotFoundError:
            return None
        # A local file has no stored checksum: reading it back is the verification.
        return ObjectInfo(key, st.st_size, sha256_file(p) if want_sha else None, st.st_mtime)

    def get_to(self, key: str, f: BinaryIO) -> int:
        try:
            with open(self._path(key), "rb") as src:
                n = 0
                while True:
                    block = src.read(COPY_BLOCK)
                    if not block:
                        return n
                    f.write(block)
                    n += len(block)
        except FileNotFoundError:
            raise EnvironmentProblem("no such object", f"{self.url}/{key}", kind="not-found") from None

    def get_bytes(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        for dirpath, dirs, files in os.walk(base):
            dirs.sort()
            for n in sorted(files):
                if n.endswith(durable.TMP_SUFFIX):
                    continue
                full = os.path.join(dirpath, n)
                st = os.stat(full)
                yield ObjectInfo(os.path.relpath(full, self.root).replace(os.sep, "/"), st.st_size, None, st.st_mtime)

    def delete(self, key: str) -> None:
        p = self._path(key)
        if os.path.lexists(p):
            durable.remove(p, self.fs)


class S3Store:
    """`s3://bucket/prefix` on any S3-compatible service. Endpoint and credentials: `endpoint_url` or
    AWS_ENDPOINT_URL, and the usual AWS_* variables / config files that boto3 reads."""

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise EnvironmentProblem("s3:// destinations need boto3: pip install 'walctl[s3]'") from None
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        cfg = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60,
                     max_pool_connections=32)
        self.client = boto3.client("s3", endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL"), config=cfg)
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors = (BotoCoreError, ClientError)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, e, key: str = "") -> EnvironmentProblem:
        return EnvironmentProblem(f"object storage: {e}", f"{self.url}/{key}" if key else self.url)

    def available(self) -> bool:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return True
        except self._errors:
            return False

    def put_file(self, key: str, path: str, sha256: str, metadata: dict | None = None) -> ObjectInfo:
        import base64

        meta = dict(metadata or {}, sha256=sha256)
        try:
            with open(path, "rb") as f:
                # ChecksumSHA256: a service that supports it rejects a body that does not match.
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=f, Metadata=meta,
                                       ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode())
        except self._errors as e:
            raise self._fail(e, key) from None
        return self.head(key, want_sha=True)

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except self._errors as e:
            raise self._fail(e, key) from None

    def head(self, key: str, want_sha: bool = False) -> ObjectInfo | None:
        import base64

        try:
            h = self.client.head_object(Bucket=self.bucket, Key=self._key(key), ChecksumMode="ENABLED")
        except self._errors as e:
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fail(e, key) from None
        sha = None
        if h.get("ChecksumSHA256") and "-" not in h["ChecksumSHA256"]:
            sha = base64.b64decode(h["ChecksumSHA256"]).hex()  # computed and checked by the service
        etag = h.get("ETag", "").strip('"')
        md5 = etag if len(etag) == 32 and all(c in "0123456789abcdef" for c in etag) else None  # not multipart
        return ObjectInfo(key, h["ContentLength"], sha, h["LastModified"].timestamp(), md5)

    def get_to(self, key: str, f: BinaryIO) -> int:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            n = 0
            for block in body.iter_chunks(COPY_BLOCK):
                f.write(block)
                n += len(block)
            return n
        except self._errors as e:
            raise self._fail(e, key) from None

    def get_bytes(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except self._errors as e:
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fail(e, key) from None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                              Prefix=self._key(prefix)):
                for o in page.get("Contents", []):
                    yield ObjectInfo(o["Key"][cut:], o["Size"], None, o["LastModified"].timestamp())
        except self._errors as e:
            raise self._fail(e) from None

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except self._errors as e:
            raise self._fail(e, key) from None


def open_store(url: str, endpoint_url: str | None = None):
    u = urlparse(url)
    if u.scheme == "file":
        if u.netloc not in ("", "localhost"):
            raise UsageError(f"{url}: a file:// destination is file:///absolute/path")
        return FileStore(os.path.abspath(u.path))
    if u.scheme == "s3":
        if not u.netloc:
            raise UsageError(f"{url}: an s3:// destination is s3://bucket[/prefix]")
        return S3Store(u.netloc, u.path, endpoint_url)
    if u.scheme == "" and url:
        return FileStore(os.path.abspath(url))  # a plain path: the local directory store
    raise UsageError(f"{url}: destinations are file:///path or s3://bucket/prefix")
