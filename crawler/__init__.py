"""crawler: a fast, polite, crash-safe web crawler. Seed URLs in, JSON lines out."""

__version__ = "0.1.0"
