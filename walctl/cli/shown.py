"""Names printed for people (file names, manifest fields, memoryIds): control characters escaped, so a
crafted name cannot move the cursor, clear the screen or forge a line of output.

The one helper is render.safe (every command's output also passes through render.SafeStream); this
module keeps the name the forensic renderers use."""
from __future__ import annotations

from .render import safe as shown

__all__ = ["shown"]
