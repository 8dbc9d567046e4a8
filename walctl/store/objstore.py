"""Object storage behind one small interface, `ObjectStore`: a local directory (`file://`, no server) or
any S3-compatible service (`s3://bucket/prefix`, through boto3, imported only when used). `open_store`
dispatches a destination URL through one table, SCHEMES (scheme -> opener); adding a store is a class
that satisfies `ObjectStore` and a row there (docs/architecture.md: "Add an object store").

Keys are `/`-separated and relative to the destination's root. Every put is whole-object: readers see
the old object or the new one (S3 replaces objects atomically; the file store writes NAME.tmp, fsyncs
it, renames it and fsyncs the directory). `put` returns what the store then holds (size, and the
SHA-256 when the store can vouch for it); callers verify against what they sent.
"""
from __future__ import annotations

import hashlib
import os
import stat
from typing import BinaryIO, Callable, Iterator, NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlparse

from ..errors import REASON_NOT_FOUND, EnvironmentProblem, UsageError
from ..format.names import is_plain_name
from . import durable
from ..format.digest import sha256_hex
from .fs import DEFAULT_FS
from .objcond import FileConditional, S3Conditional, missing

COPY_BLOCK = 1 << 20
MULTIPART_THRESHOLD_BYTES = 5 << 30  # S3's single-put limit: larger files go in parts
PART_BYTES = 256 << 20  # S3: at least 5 MiB per part but the last, at most 10,000 parts


class ObjectInfo(NamedTuple):
    key: str
    size: int
    sha256: str | None  # the SHA-256 the service computed and checked itself, when it says
    modified: float | None = None
    md5: str | None = None  # S3's ETag of a single-part upload: the MD5 of the bytes it stored
    composite: str | None = None  # S3's checksum of a multipart object: base64 SHA-256 of the parts' ones, "-N"


@runtime_checkable
class ObjectStore(Protocol):
    """What the archive asks of a destination (the rules: this module's docstring). A missing object is
    None from head/get_bytes, EnvironmentProblem(kind="not-found") from get_to (live readers retry on it);
    the conditional writes (the follower's lock) are store/objcond.py's, one mixin per store."""
    url: str

    def available(self) -> bool: ...
    def put_file(self, key: str, path: str, sha256: str, metadata: dict | None = None) -> ObjectInfo: ...
    def put_data(self, key: str, data: bytes, sha256: str, metadata: dict | None = None) -> ObjectInfo: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def head(self, key: str, want_sha: bool = False) -> ObjectInfo | None: ...
    def get_to(self, key: str, f: BinaryIO) -> int: ...
    def get_bytes(self, key: str) -> bytes | None: ...
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...
    def delete(self, key: str) -> None: ...
    def put_new(self, key: str, data: bytes) -> bool: ...
    def read_tagged(self, key: str) -> tuple[bytes, str] | None: ...
    def replace_if(self, key: str, data: bytes, tag: str) -> bool: ...
    def take_over(self, key: str, data: bytes, tag: str, token: str) -> bool: ...


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


class FileStore(FileConditional):
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
        while not self._is_dir(d) and d != self.root:
            d, part = os.path.split(d)
            missing.append(part)
        for d in [self.root] + [os.path.join(d, *reversed(missing[i:])) for i in range(len(missing) - 1, -1, -1)]:
            try:
                durable.make_dir(d, self.fs)
            except EnvironmentProblem:
                if not self._is_dir(d):  # else another upload thread created it first
                    raise

    def _is_dir(self, d: str) -> bool:
        st = self.fs.lstat(d)  # from the root opened once, as every step here
        return st is not None and stat.S_ISDIR(st.st_mode)

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

    def put_data(self, key: str, data: bytes, sha256: str, metadata: dict | None = None) -> ObjectInfo:
        """A small object from memory (a live piece), then what the store holds, read back."""
        self.put_bytes(key, data)
        return self.head(key, want_sha=True)

    def _open(self, key: str):
        """The object's file for reading, or None when there is none. An object is a regular file of its
        own: a link, a FIFO (which would block every archive command) or a device is no object."""
        try:
            fd = self.fs.open_read(self._path(key), follow=False)  # from the root opened once (store/root.py)
        except EnvironmentProblem as e:
            if e.kind == "not-found":
                return None
            raise EnvironmentProblem(f"not a readable object ({e.reason})", f"{self.url}/{key}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise EnvironmentProblem("not a regular file: no object", f"{self.url}/{key}")
        return os.fdopen(fd, "rb")

    def head(self, key: str, want_sha: bool = False) -> ObjectInfo | None:
        p = self._path(key)
        st = self.fs.lstat(p)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise EnvironmentProblem("not a regular file: no object", f"{self.url}/{key}")
        if not want_sha:
            return ObjectInfo(key, st.st_size, None, st.st_mtime)
        # A local file has no stored checksum: reading it back (through the root's descriptor) is the verification.
        with self.fs.map_read(p) as buf:
            return ObjectInfo(key, st.st_size, sha256_hex(buf), st.st_mtime)

    def get_to(self, key: str, f: BinaryIO) -> int:
        src = self._open(key)
        if src is None:
            raise EnvironmentProblem("no such object", f"{self.url}/{key}", kind="not-found")
        with src:
            n = 0
            while True:
                block = src.read(COPY_BLOCK)
                if not block:
                    return n
                f.write(block)
                n += len(block)

    def get_bytes(self, key: str) -> bytes | None:
        src = self._open(key)
        if src is None:
            return None
        with src:
            return src.read()

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        yield from self._walk(self._path(prefix.rstrip("/")) if prefix else self.root)

    def _walk(self, d: str) -> Iterator[ObjectInfo]:
        """os.walk's order (a directory's files by name, then its subdirectories by name), each step from
        the root opened once (store/root.py), never by a path that could have been swapped."""
        try:
            entries = sorted(self.fs.listdir(d))
        except EnvironmentProblem:
            return  # no such prefix (yet): no objects
        stats = [(e, self.fs.lstat(e.path)) for e in entries]
        for e, st in stats:
            # a link, FIFO or device in the store is no object: never read, never listed
            if st is not None and stat.S_ISREG(st.st_mode) and not e.name.endswith(durable.TMP_SUFFIX):
                yield ObjectInfo(os.path.relpath(e.path, self.root).replace(os.sep, "/"), st.st_size, None,
                                 st.st_mtime)
        for e, st in stats:
            if st is not None and stat.S_ISDIR(st.st_mode):
                yield from self._walk(e.path)

    def delete(self, key: str) -> None:
        p = self._path(key)
        if os.path.lexists(p):
            durable.remove(p, self.fs)


class S3Store(S3Conditional):
    """`s3://bucket/prefix` on any S3-compatible service. Endpoint and credentials: `endpoint_url` or
    AWS_ENDPOINT_URL, and the usual AWS_* variables / config files that boto3 reads."""

    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None,
                 multipart_threshold: int = MULTIPART_THRESHOLD_BYTES, part_bytes: int = PART_BYTES):
        self.multipart_threshold, self.part_bytes = multipart_threshold, part_bytes
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
        if os.path.getsize(path) > self.multipart_threshold:
            return self._put_multipart(key, path, sha256, meta)
        try:
            with open(path, "rb") as f:
                # ChecksumSHA256: a service that supports it rejects a body that does not match.
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=f, Metadata=meta,
                                       ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode())
        except self._errors as e:
            raise self._fail(e, key) from None
        return self.head(key, want_sha=True)

    def _put_multipart(self, key: str, path: str, sha256: str, meta: dict) -> ObjectInfo:
        """A file over the threshold, in parts: each part is put with its SHA-256, which the service
        checks against the bytes it received (a part that does not match is rejected); the object's
        composite checksum (SHA-256 of the parts' SHA-256s, "-N") is then compared with the one computed
        here, which proves the parts were assembled in order. A failed upload is aborted (no orphan
        parts)."""
        import base64

        k = self._key(key)
        try:
            up = self.client.create_multipart_upload(Bucket=self.bucket, Key=k, Metadata=meta,
                                                     ChecksumAlgorithm="SHA256")
        except self._errors as e:
            raise self._fail(e, key) from None
        uid, parts, digests = up["UploadId"], [], []
        try:
            with open(path, "rb") as f:
                n = 0
                while True:
                    block = f.read(self.part_bytes)
                    if not block and n:
                        break
                    n += 1
                    d = hashlib.sha256(block).digest()
                    b64 = base64.b64encode(d).decode()
                    r = self.client.upload_part(Bucket=self.bucket, Key=k, UploadId=uid, PartNumber=n, Body=block,
                                                ChecksumSHA256=b64)
                    if r.get("ChecksumSHA256") not in (None, b64):
                        raise EnvironmentProblem(f"part {n}: the service stored SHA-256 {r['ChecksumSHA256']}, "
                                                 f"sent {b64}", f"{self.url}/{key}")
                    parts.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumSHA256": b64})
                    digests.append(d)
                    if len(block) < self.part_bytes:
                        break
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=k, UploadId=uid,
                                                  MultipartUpload={"Parts": parts})
        except BaseException as e:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=k, UploadId=uid)
            except self._errors:
                pass
            if isinstance(e, self._errors):
                raise self._fail(e, key) from None
            raise
        info = self.head(key)
        composite = base64.b64encode(hashlib.sha256(b"".join(digests)).digest()).decode()
        if info is not None and info.composite == composite:
            return info._replace(sha256=sha256)  # every part checked by the service, in our order
        return info  # no composite checksum from this service: the caller reads the object back

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except self._errors as e:
            raise self._fail(e, key) from None

    def put_data(self, key: str, data: bytes, sha256: str, metadata: dict | None = None) -> ObjectInfo:
        """A small object from memory (a live piece), put with ChecksumSHA256 as put_file does."""
        import base64

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                   Metadata=dict(metadata or {}, sha256=sha256),
                                   ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode())
        except self._errors as e:
            raise self._fail(e, key) from None
        return self.head(key, want_sha=True)

    def head(self, key: str, want_sha: bool = False) -> ObjectInfo | None:
        import base64

        try:
            h = self.client.head_object(Bucket=self.bucket, Key=self._key(key), ChecksumMode="ENABLED")
        except self._errors as e:
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fail(e, key) from None
        sha = composite = None
        etag = h.get("ETag", "").strip('"')
        multipart = "-" in etag or "-" in h.get("ChecksumSHA256", "")
        if h.get("ChecksumSHA256") and not multipart:
            sha = base64.b64decode(h["ChecksumSHA256"]).hex()  # computed and checked by the service
        elif h.get("ChecksumSHA256"):  # of the parts' checksums, not of the bytes (some services omit "-N")
            composite = h["ChecksumSHA256"].split("-")[0]
        md5 = etag if len(etag) == 32 and all(c in "0123456789abcdef" for c in etag) else None  # not multipart
        return ObjectInfo(key, h["ContentLength"], sha, h["LastModified"].timestamp(), md5, composite)

    def get_to(self, key: str, f: BinaryIO) -> int:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
            n = 0
            for block in body.iter_chunks(COPY_BLOCK):
                f.write(block)
                n += len(block)
            return n
        except self._errors as e:
            if missing(e):  # as the file store says it: readers of a live archive retry on it
                raise EnvironmentProblem("no such object", f"{self.url}/{key}", kind=REASON_NOT_FOUND) from None
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


def _open_file(url: str, netloc: str, path: str, endpoint_url: str | None) -> ObjectStore:
    if netloc not in ("", "localhost"):
        raise UsageError(f"{url}: a file:// destination is file:///absolute/path")
    return FileStore(os.path.abspath(path))


def _open_s3(url: str, netloc: str, path: str, endpoint_url: str | None) -> ObjectStore:
    if not netloc:
        raise UsageError(f"{url}: an s3:// destination is s3://bucket[/prefix]")
    return S3Store(netloc, path, endpoint_url)


# scheme -> opener(url, netloc, path, endpoint_url). A URL without a scheme is a local path (file://).
SCHEMES: dict[str, Callable[[str, str, str, str | None], ObjectStore]] = {"file": _open_file, "s3": _open_s3}


def open_store(url: str, endpoint_url: str | None = None) -> ObjectStore:
    u = urlparse(url)
    opener = SCHEMES.get(u.scheme)
    if opener is not None:
        return opener(url, u.netloc, u.path, endpoint_url)
    if u.scheme == "" and url:
        return FileStore(os.path.abspath(url))  # a plain path: the local directory store
    raise UsageError(f"{url}: destinations are file:///path or s3://bucket/prefix")
