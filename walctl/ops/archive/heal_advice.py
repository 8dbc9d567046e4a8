"""The one place that says when an archive can heal what verify found: verify, map and repair print its
line first among their `next:` steps (a test runs it exactly as printed)."""
from __future__ import annotations

import os

ARCHIVE_ENV = "WALCTL_ARCHIVE"  # the archive verify, map and repair ask when --from is not given


def heal_steps(report, archive: str | None = None) -> list:
    """The heal command, exactly, when an archive (--from, else $WALCTL_ARCHIVE) holds a good copy of
    something this verify report found damaged or missing; [] when no archive is named, it heals nothing
    here, or it cannot be read (the rest of the advice stands)."""
    from ...errors import EXIT_ENVIRONMENT, WalctlError
    from ..advice import step

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


def advise(report, archive: str | None = None) -> list:
    """verify's next steps with an archive in view: where it can heal, the heal and then looking, and
    nothing that gives bytes up (an accepted loss, a salvage, a cut) until the heal has run (verify after
    it advises what is left); elsewhere, ops/advice.py's steps as they are."""
    from ..advice import look_steps, next_steps

    heal = heal_steps(report, archive)
    return heal + look_steps(report) if heal else next_steps(report)
