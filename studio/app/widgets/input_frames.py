"""Input fields that look like input fields on a dark palette. Fusion draws the frame of a text
field, a spin box and a check box in its "outline" colour, the window colour darkened: on a dark
palette that is darker than the dark field itself, so fields read as labels. ``FramedStyle`` (Fusion
underneath) draws those frames again in a colour that stands out from both the
window and the base on a dark palette (``style.colour("frame")``: 3:1 against both, what WCAG asks of
a control's boundary); on a light palette it leaves Fusion's frames as they are."""
from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleFactory

from .style import colour, is_dark

PE = QStyle.PrimitiveElement
CC = QStyle.ComplexControl


class FramedStyle(QProxyStyle):
    def __init__(self):
        super().__init__(QStyleFactory.create("Fusion"))
        self.setObjectName("scellis_framed_fusion")

    def _frame(self, painter, rect, palette, radius: float) -> None:
        painter.save()
        painter.setRenderHint(painter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(QColor(colour("frame", palette)), 1))
        painter.setBrush(painter.brush().style().NoBrush)
        painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), radius, radius)
        painter.restore()

    def drawPrimitive(self, element, option, painter, widget=None) -> None:  # Qt's name
        super().drawPrimitive(element, option, painter, widget)
        if element in (PE.PE_FrameLineEdit, PE.PE_IndicatorCheckBox) and is_dark(option.palette) and \
                not (option.state & QStyle.StateFlag.State_HasFocus):
            self._frame(painter, option.rect, option.palette, 2 if element == PE.PE_FrameLineEdit else 1)

    def drawComplexControl(self, control, option, painter, widget=None) -> None:
        super().drawComplexControl(control, option, painter, widget)
        if control == CC.CC_SpinBox and getattr(option, "frame", True) and is_dark(option.palette) and \
                not (option.state & QStyle.StateFlag.State_HasFocus):
            self._frame(painter, option.rect, option.palette, 2)
