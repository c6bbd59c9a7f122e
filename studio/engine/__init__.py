"""The headless engine. Nothing below this package may import Qt."""
