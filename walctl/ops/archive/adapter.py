"""The library's archive API in Spector's StorageAdapter shape: upload / download / list_chunks /
list_namespaces / is_available over a walctl destination, and ship() for a Shipper inside the writer's
process. Rules: docs/format.md section 13."""
from __future__ import annotations

import hashlib
import tempfile

from ...errors import EXIT_CORRUPT, NotClean, Refused, UsageError
from ...format.names import parse_chunk_name
from ...store.objstore import open_store
from .objects import CHUNKS, Entry, check_namespace, object_key, valid_object, verify_upload
from .listing import namespaces


class StorageAdapter:
    """upload / download / list_chunks / list_namespaces / is_available over a walctl destination, so a
    runtime can plug the archive into its own loop. Uploads go under `<namespace>/chunks/` and are
    verified like `archive push` does; the manifest is left to `archive push` (and rebuilt from the
    listing by every reader)."""

    def __init__(self, dest: str, endpoint_url: str | None = None):
        self.store = open_store(dest, endpoint_url)

    def upload(self, namespace: str, chunk_name: str, data: bytes) -> None:
        check_namespace(namespace)
        if not valid_object(CHUNKS, chunk_name):
            raise UsageError(f"bad chunk name {chunk_name!r} (wal-NNNNNN.bin)")
        with tempfile.NamedTemporaryFile(prefix="walctl-up-") as f:
            f.write(data)
            f.flush()
            key = object_key(namespace, CHUNKS, chunk_name)
            sha = hashlib.sha256(data).hexdigest()
            if self.store.head(key) is not None:
                raise Refused(f"{key} exists; archived objects are never overwritten", self.store.url)
            info = self.store.put_file(key, f.name, sha)
            why = verify_upload(self.store, key, Entry(chunk_name, CHUNKS, len(data), sha, None, None, ""), info)
            if why:
                raise NotClean(f"{key}: upload not verified: {why}", self.store.url, code=EXIT_CORRUPT)

    def download(self, namespace: str, chunk_name: str) -> bytes | None:
        return self.store.get_bytes(object_key(namespace, CHUNKS, chunk_name))

    def list_chunks(self, namespace: str) -> list[str]:
        names = [o.key.rsplit("/", 1)[-1] for o in self.store.list(f"{namespace}/{CHUNKS}/")
                 if o.key.count("/") == 2 and valid_object(CHUNKS, o.key.rsplit("/", 1)[-1])]
        return sorted(names, key=lambda n: (parse_chunk_name(n) if parse_chunk_name(n) is not None else -1, n))

    def list_namespaces(self) -> list[str]:
        return namespaces(self.store)

    def is_available(self) -> bool:
        return self.store.available()

    def ship(self, namespace: str, wal_dir: str, **options):
        """A Shipper (ops/archive/follow.py) of `wal_dir` into `namespace` on this destination: call its
        `poll()` after each group commit (or on a timer) and `close()` when done; `poll()` returns the
        last sequence archived and verified. Options: interval, min_piece_bytes, max_wait,
        manifest_interval, checkpoints, on_shipped(sequence)."""
        from .follow import Shipper

        return Shipper(wal_dir, self.store.url, namespace=namespace, store=self.store, **options)
