"""The Export button every plot carries: PNG (raster), SVG (vector, through pyqtgraph's own
exporter: axes and data on one scale) and CSV (every plotted series with a header, the input
included). PNG and SVG paint on the GUI thread (they render the plot); a CSV's formatting and
write go to the background pool when one is given (a million-sample plot takes seconds)."""
from __future__ import annotations

import weakref
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.errors import StudioError

FILTERS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)", "csv": "CSV data, every series (*.csv)"}


class PlotExportButton(QToolButton):
    """"Export ▾" for one plot. ``exported(path)`` after a file is written; ``failed(error)``."""
    exported = Signal(str)
    failed = Signal(object)

    def __init__(self, plot, name: str, background=None, parent=None):
        super().__init__(parent)
        self._plot = weakref.ref(plot)        # (the plot holds its button: no cycle for the collector)
        self.name, self.background = name, background
        self.setText("Export ▾")
        self.setObjectName(f"export_{name}")
        self.setToolTip("Export this plot: PNG, SVG (vector) or CSV (every plotted series, with a header)")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self)
        self.actions_by_format = {}
        for fmt, label in (("png", "PNG image…"), ("svg", "SVG vector image…"), ("csv", "CSV data (every series)…")):
            a = menu.addAction(label)
            a.setToolTip(FILTERS[fmt])
            a.triggered.connect(lambda _=False, f=fmt: self.choose(f))
            self.actions_by_format[fmt] = a
        self.setMenu(menu)
        self.last_dir = str(Path.home())

    @property
    def plot(self):
        return self._plot()

    def choose(self, fmt: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, f"Export {self.name} as {fmt.upper()}",
                                              str(Path(self.last_dir) / f"{self.name}.{fmt}"), FILTERS[fmt])
        if path:
            if not path.lower().endswith("." + fmt):
                path += "." + fmt
            self.last_dir = str(Path(path).parent)
            self.export(path)

    def export(self, path: str | Path):
        """Write the plot to ``path`` (format by extension). Returns the background future for a CSV
        written off the GUI thread, else None."""
        from ...figures import export_plot, series_table, table_csv
        path = str(path)
        try:
            if path.lower().endswith(".csv") and self.background is not None:
                table = series_table(self.plot)

                def write():
                    from ...engine.atomic import write_bytes
                    write_bytes(path, table_csv(*table).encode("utf-8"))
                    return path
                return self.background.run(write, self.exported.emit, self.failed.emit, ordered=True)
            export_plot(self.plot, path)
        except (OSError, StudioError, ValueError) as e:
            self.failed.emit(e if isinstance(e, StudioError) else StudioError(f"cannot export {path}: {e}"))
            return None
        self.exported.emit(path)
        return None


def plot_with_export(plot, name: str, background=None, extra: list[QWidget] | None = None) -> QWidget:
    """The plot with a row above it: ``extra`` widgets, then the Export button on the right.
    The button is ``plot.export_button``."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(2)
    row = QHBoxLayout()
    for w in extra or []:
        row.addWidget(w)
    row.addStretch(1)
    button = PlotExportButton(plot, name, background)
    row.addWidget(button)
    lay.addLayout(row)
    lay.addWidget(plot, 1)
    plot.export_button = button
    return box
