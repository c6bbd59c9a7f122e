"""What the user sees once an op is published: a confirmation that says what changed (visibility,
license, the proofs earned again for the new op.toml), in the status bar and a non-modal message
box. The notebook's proofs stay fresh on their own: the receipts publishing earned vouch for the
new content (freshness.py ``vouched``)."""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox


def confirmation_text(lines: list[str]) -> tuple[str, str]:
    """(the headline, the details) of a publish result's lines (services.publishing.publish)."""
    lines = [str(ln) for ln in lines if str(ln).strip()]
    if not lines:
        return "Published.", ""
    head = lines[0].strip()
    reproved = any("conformance here" in ln for ln in lines)
    tail = " Conformance ran again for the new op.toml and its receipt is valid." if reproved else ""
    return f"Published: {head}.{tail}", "\n".join(ln.strip() for ln in lines[1:])


def confirm_published(window, lines: list[str]) -> QMessageBox:
    """Show the confirmation (the status bar for a while, and a message box that does not block)."""
    head, details = confirmation_text(lines)
    bar = window.statusBar() if hasattr(window, "statusBar") else None
    if bar is not None:
        bar.showMessage(head, 15_000)
    box = QMessageBox(QMessageBox.Icon.Information, "Published", head, QMessageBox.StandardButton.Ok, window)
    box.setObjectName("published_confirmation")
    if details:
        box.setInformativeText(details)
    box.setModal(False)
    box.open()
    return box
