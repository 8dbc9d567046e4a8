"""The only code that touches the file system. Everything goes through a FileSystem (fs.py)."""
