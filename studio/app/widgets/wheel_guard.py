"""Controls that change only on purpose: the mouse wheel never edits a dropdown or a spin box
the user has not focused. Scrolling the notebook over a Bindings table, a code editor or a plot scrolls the notebook; the
area itself scrolls (or zooms) once the user clicked into it.

``guard(widget)`` gives a combo box or spin box the ``StrongFocus`` policy (a wheel turn does not
focus it) and a filter that turns an unfocused control's wheel events into a scroll of the
scroll area under it. Once the user clicks or tabs into the control, the wheel steps its
value as usual. ``guard_tree(root)`` guards every such control under ``root``.
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSpinBox, QApplication, QComboBox, QWidget

GUARDED = (QComboBox, QAbstractSpinBox)


class WheelGuard(QObject):
    def eventFilter(self, obj, e) -> bool:
        if e.type() == QEvent.Type.Wheel and isinstance(obj, QWidget) and not obj.hasFocus():
            scroll_under(obj, e)
            return True                                   # never the control's own value
        return False


def scroll_under(widget: QWidget, e) -> bool:
    """Scroll the nearest scroll area around ``widget`` that can move in the wheel's direction (a
    table the control sits in, else the notebook): what the wheel would have done over the
    background. Done explicitly: Qt propagates only spontaneous wheel events to parents."""
    delta = e.angleDelta()
    vertical = abs(delta.y()) >= abs(delta.x())
    step = delta.y() if vertical else delta.x()
    if step == 0:
        return False
    w = widget.parentWidget()
    while w is not None:
        if isinstance(w, QAbstractScrollArea) and not (w.property("wheel_guarded") and not focused(w)):
            bar = w.verticalScrollBar() if vertical else w.horizontalScrollBar()
            can = bar.value() > bar.minimum() if step > 0 else bar.value() < bar.maximum()
            if bar.maximum() > bar.minimum() and can:
                QCoreApplication.sendEvent(bar, e)
                return True
        w = w.parentWidget()
    return False


def guard(widget: QWidget) -> QWidget:
    if isinstance(widget, GUARDED) and not widget.property("wheel_guarded"):
        widget.setProperty("wheel_guarded", True)
        widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        f = WheelGuard(widget)                            # owned by the widget: goes with it
        widget.installEventFilter(f)
    return widget


class AreaGuard(QObject):
    """On a scroll area's viewport (a code editor, a table, a plot): the wheel scrolls or zooms the
    area only once the user clicked or tabbed into it; before that it scrolls the page around it."""

    def __init__(self, area: QAbstractScrollArea):
        super().__init__(area)
        self.area = area

    def eventFilter(self, obj, e) -> bool:
        if e.type() == QEvent.Type.Wheel and not focused(self.area):
            scroll_under(self.area, e)
            return True
        return False


def focused(area: QWidget) -> bool:
    """The area, or a control inside it (a table's cell editor), has the keyboard focus."""
    f = QApplication.focusWidget()
    return f is not None and (f is area or area.isAncestorOf(f))


def guard_area(area: QAbstractScrollArea) -> QAbstractScrollArea:
    if not area.property("wheel_guarded"):
        area.setProperty("wheel_guarded", True)
        if area.focusPolicy() & Qt.FocusPolicy.WheelFocus == Qt.FocusPolicy.WheelFocus or \
                area.focusPolicy() == Qt.FocusPolicy.NoFocus:
            area.setFocusPolicy(Qt.FocusPolicy.StrongFocus if area.focusPolicy() != Qt.FocusPolicy.NoFocus
                                else Qt.FocusPolicy.ClickFocus)
        area.viewport().installEventFilter(AreaGuard(area))
    return area


def guard_tree(root: QWidget) -> None:
    """Guard every dropdown and spin box under ``root``, and every scroll area in it (code editors,
    tables, plots): none of them takes the wheel from the page until the user chose it."""
    for w in root.findChildren(QWidget):
        if isinstance(w, GUARDED):
            guard(w)
        elif isinstance(w, QAbstractScrollArea):
            guard_area(w)
