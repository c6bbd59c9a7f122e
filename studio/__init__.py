"""Scellis Studio: author GPU compute ops as content and prove them right."""
__version__ = "0.1.0"
