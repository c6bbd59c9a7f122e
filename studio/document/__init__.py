"""The document model: one op package being edited, without Qt (studio/document/model.py)."""
