"""Substrat agent session roots: read, recover, set aside, the agent tree."""
