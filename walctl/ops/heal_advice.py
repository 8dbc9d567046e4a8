"""The one place that says when an archive can heal what verify found: verify, map and repair print its
line first among their `next:` steps (a test runs it exactly as printed)."""
from __future__ import annotations

import os

ARCHIVE_ENV = "WALCTL_ARCHIVE"  # the archive verify, map and repair ask when --from is not given


def heal_steps(report, archive: str | None = None) -> list:
    """The heal command, exactly, when an archive (--from, else $WALCTL_ARCHIVE) holds a good copy of
    something this verify report found damaged or missing; [] when no archive is named, it heals nothing
    here, or it cannot be read (the rest of the advice stands)."""
    from ..errors import EXIT_ENVIRONMENT, WalctlError
    from .advice import step

    archive = archive or os.environ.get(ARCHIVE_ENV)
    if not archive or report.kind is None or report.exit_code in (0, EXIT_ENVIRONMENT):
        return []
    from .heal_apply import plan_for

    try:
        rep = plan_for(report, archive)
    except WalctlError:
        return []
    if not rep.heals:
        return []
    return [step("heal", os.path.abspath(report.path), "--from", rep.destination, "--namespace", rep.namespace)]
