"""One row of the Models list: a status icon, the model's whole name and a muted second line.

An export's name ("Qwen3.5-0.8B-INT4-asym-g64") is long and has no spaces, and the list is
narrow on a small window: the name wraps at its hyphens (anywhere only when one part alone is
wider) instead of being cut mid-word, and what the model is goes on a line of its own.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPointF, QRect, QSize, Qt
from PySide6.QtGui import (
    QFont,
    QFontMetrics,
    QIcon,
    QPainter,
    QPalette,
    QResizeEvent,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import (
    QApplication,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
)

#: The second line: what the model is ("Qwen3.5 dense · 1.8 MB · MTP head").
DETAIL_ROLE = Qt.ItemDataRole.UserRole + 2
#: True for the model the chat has loaded.
LOADED_ROLE = Qt.ItemDataRole.UserRole + 3
LOADED_TEXT = "loaded in the chat"
ICON = 16
PAD = 6

Index = QModelIndex | QPersistentModelIndex


def name_lines(text: str, font: QFont, width: int) -> list[str]:
    """`text` broken into lines of at most `width` pixels, at word boundaries and hyphens."""
    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    lines: list[str] = []
    layout.beginLayout()
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(max(width, 20))
        lines.append(text[line.textStart() : line.textStart() + line.textLength()])
    layout.endLayout()
    return lines or [""]


class ModelList(QTreeWidget):
    """The list itself: its rows' heights follow its width (names wrap)."""

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.scheduleDelayedItemsLayout()


class ModelRowDelegate(QStyledItemDelegate):
    """Paints and sizes the rows of `view` (one column)."""

    def __init__(self, view: QTreeWidget) -> None:
        super().__init__(view)
        self._view = view

    def _text_width(self, option: QStyleOptionViewItem) -> int:
        width = option.rect.width() if option.rect.isValid() else self._view.viewport().width()
        return width - ICON - 3 * PAD

    @staticmethod
    def _fonts(option: QStyleOptionViewItem, index: Index) -> tuple[QFont, QFont]:
        font = index.data(Qt.ItemDataRole.FontRole)
        name = QFont(font) if isinstance(font, QFont) else QFont(option.font)
        detail = QFont(option.font)
        detail.setPointSizeF(max(option.font.pointSizeF() - 1.0, 7.0))
        return name, detail

    @staticmethod
    def _detail(index: Index) -> str:
        detail = str(index.data(DETAIL_ROLE) or "")
        if index.data(LOADED_ROLE):
            detail = f"{detail} · {LOADED_TEXT}" if detail else LOADED_TEXT
        return detail

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:  # noqa: N802
        name_font, detail_font = self._fonts(option, index)
        width = self._text_width(option)
        text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        lines = name_lines(text, name_font, width)
        names, details = QFontMetrics(name_font), QFontMetrics(detail_font)
        detail_lines = name_lines(self._detail(index), detail_font, width)
        widest = max(names.horizontalAdvance(line) for line in lines)
        height = names.lineSpacing() * len(lines) + details.lineSpacing() * len(detail_lines)
        return QSize(min(widest, width) + ICON + 3 * PAD, max(height + 2 * PAD, ICON + 2 * PAD))

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        self.initStyleOption(option, index)
        style = option.widget.style() if option.widget is not None else QApplication.style()
        text_role = QPalette.ColorRole.Text
        if option.state & QStyle.StateFlag.State_Selected:
            text_role = QPalette.ColorRole.HighlightedText
        # The background (selection, hover, alternate rows) as the style draws it, no text.
        option.text = ""
        option.icon = QIcon()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, option, painter, option.widget)
        rect: QRect = option.rect
        name_font, detail_font = self._fonts(option, index)
        names, details = QFontMetrics(name_font), QFontMetrics(detail_font)
        icon = index.data(Qt.ItemDataRole.DecorationRole)
        painter.save()
        if icon is not None and not icon.isNull():
            icon.paint(painter, QRect(rect.left() + PAD, rect.top() + PAD + 1, ICON, ICON))
        left = rect.left() + ICON + 2 * PAD
        width = self._text_width(option)
        top = rect.top() + PAD
        color = option.palette.color(text_role)
        painter.setPen(color)
        painter.setFont(name_font)
        text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        for line in name_lines(text, name_font, width):
            painter.drawText(QPointF(left, top + names.ascent()), line)
            top += names.lineSpacing()
        muted = QPalette(option.palette).color(QPalette.ColorRole.PlaceholderText)
        if not option.state & QStyle.StateFlag.State_Selected:
            painter.setPen(muted)
        painter.setFont(detail_font)
        for line in name_lines(self._detail(index), detail_font, width):
            painter.drawText(QPointF(left, top + details.ascent()), line)
            top += details.lineSpacing()
        painter.restore()
