"""One use case per module; each returns a frozen report and never prints."""
