"""What the device panels (conformance, gradcheck, run) share: a job with run and cancel
buttons, a progress bar and a status chip."""
from __future__ import annotations

from ..cells.base import Cell


def error_html(err) -> str:
    from ..widgets.style import colour
    text = err.format() if hasattr(err, "format") else str(err)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<span style='color:{colour('error')}'>✖ {text}</span>".replace("\n", "<br>")


class JobPanel(Cell):
    """Subclasses create ``run_button``, ``cancel_button`` and ``progress``."""

    def on_progress(self, done: int, total: int) -> None:
        """Indeterminate (busy) until the worker says how many there are; then "done / total"."""
        if total:
            self.progress.setRange(0, total)
            self.progress.setValue(done)
            self.progress.setTextVisible(True)

    def on_note(self, event: dict) -> None:
        """An event the worker sent before the result; panels that show one override this."""

    def stopped(self, text: str, kind: str) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if kind == "ok" else 0)
        self.progress.setTextVisible(False)
        self.set_status(text, kind)
