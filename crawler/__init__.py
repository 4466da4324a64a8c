"""crawler: a fast, polite, crash-safe web crawler. Seed URLs in, JSON lines out.

The public API is what this module exports: `Crawler`, `Page`, `Settings`,
`ConfigError`, `ErrorKind` (the kinds a record's `error` may hold), and
`keep_freed_memory()`, the CLI's heap tuning as a process-wide opt-in. Nothing
else is promised.
"""

__version__ = "0.1.0"

from crawler.api import Crawler
from crawler.config import ConfigError, Settings
from crawler.errors import ErrorKind
from crawler.malloc import keep_freed_memory
from crawler.page import Page

__all__ = [
    "ConfigError",
    "Crawler",
    "ErrorKind",
    "Page",
    "Settings",
    "__version__",
    "keep_freed_memory",
]
