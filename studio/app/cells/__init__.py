"""The notebook's cells, in the order of the authoring journey (docs/studio.md)."""
