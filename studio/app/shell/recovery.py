"""Crash recovery for the main window (an object the window holds: ``window.recovery``): after an unclean exit, offer the
documents autosave kept (studio/app/shell/autosave.py) and reopen the ones the user wants."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from ...engine.errors import StudioError
from ..notebook.documents import read_folder
from ..notebook.model import OpDocument


class Recovery:
    """Needs the window's ``store`` (AutosaveStore) and ``add_document``."""

    def __init__(self, window):
        self.window = window

    def offer(self) -> list:
        """The DocumentViews restored (none when the user declined: their autosaves are set aside)."""
        store = self.window.store
        entries = store.orphans()
        if not entries or not self.ask(entries):
            for e in entries:
                store.set_aside(e)
            return []
        restored = []
        for e in entries:
            doc = OpDocument(e.files, Path(e.package) if e.package else None, binary=e.binary,
                             saved=_on_disk(e.package), doc_id=e.doc_id)
            view = self.window.add_document(doc)
            view.session.autosave_now()
            restored.append(view)
        return restored

    def ask(self, entries) -> bool:
        names = "\n".join(f"• {e.title}" for e in entries)
        return QMessageBox.question(self.window, "Restore unsaved work?",
                                    f"Scellis Studio did not close cleanly. Restore these documents?\n\n{names}"
                                    ) == QMessageBox.StandardButton.Yes


def _on_disk(package: str | None) -> dict[str, str] | None:
    if not package:
        return None
    try:
        return read_folder(Path(package))[0]
    except (StudioError, OSError):
        return {}
