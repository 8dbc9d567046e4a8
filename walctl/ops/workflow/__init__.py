"""The ADR-002 workflow checkpoint store and its pause/resume/complete flow."""
