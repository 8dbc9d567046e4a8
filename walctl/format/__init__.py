"""Pure codecs: bytes <-> values. Nothing here opens a file, reads a clock or prints."""
