"""Tiffany per-task logs."""
