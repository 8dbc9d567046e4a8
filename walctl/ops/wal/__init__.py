"""Spector V2 WAL and ADR-003 segment directories: verify, replay, follow, repair, salvage, compact, quarantine, write, import, merge, migrate."""
