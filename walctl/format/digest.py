"""SHA-256 of bytes as hex, with hashlib loaded on first use: `walctl verify` of a directory without
seals never hashes, and hashlib's OpenSSL binding is a few milliseconds of start-up (cold start)."""
from __future__ import annotations


def sha256_hex(data) -> str:
    """Hex SHA-256 of bytes, a bytearray, an mmap or a memoryview."""
    import hashlib

    return hashlib.sha256(data).hexdigest()
