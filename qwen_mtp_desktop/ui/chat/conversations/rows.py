"""A chat-list row drawn: its title, and below it when it was used with a preview, or in a
search's results the snippet of the message that matched with the searched words marked.

The snippet's parts are drawn as text with QPainter, one part at a time: nothing in them is
ever read as markup, whatever the message held.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from qwen_mtp_desktop.ui.widgets.style import FOUND_MARK

#: The row's second line as parts: a tuple of (text, marked) pairs (see core.chat.snippets).
LINE_ROLE = Qt.ItemDataRole.UserRole + 1


def _first_mark_in_view(
    parts: tuple[tuple[str, bool], ...], metrics: QFontMetrics, width: int
) -> tuple[tuple[str, bool], ...]:
    """The parts with the words before the first marked one shortened from the left (after
    the first part, the date) when that mark would end past the row's edge: the row shows
    the match, not the text leading to it."""
    first = next((i for i, (_text, marked) in enumerate(parts) if marked), None)
    if first is None or first < 2:
        return parts
    need = sum(metrics.horizontalAdvance(text) for text, _marked in parts[: first + 1])
    if need <= width:
        return parts
    lead = "".join(text for text, _marked in parts[1:first])
    room = metrics.horizontalAdvance(lead) - (need - width)
    shortened = metrics.elidedText(lead, Qt.TextElideMode.ElideLeft, max(room, 0))
    return (parts[0], (shortened, False), *parts[first:])


class ChatRowDelegate(QStyledItemDelegate):
    """Draws every row the same way (background, pin and title by the style; the second line
    here), so rows with and without a snippet line up."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dark = False

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        # The item's own text (the option's has its line break replaced by U+2028).
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or "").split("\n", 1)[0]
        parts = index.data(LINE_ROLE) or ()
        opt.text = ""  # the style draws the background, selection and pin; the text is ours
        widget = opt.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        area = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, widget)
        metrics = QFontMetrics(opt.font)
        line = metrics.lineSpacing()
        top = area.top() + max((area.height() - 2 * line) // 2, 0)
        painter.save()
        painter.setFont(opt.font)
        painter.setPen(opt.palette.color(QPalette.ColorGroup.Normal, QPalette.ColorRole.Text))
        left, width = area.left() + 2, area.width() - 4
        elided = metrics.elidedText(title, Qt.TextElideMode.ElideRight, width)
        painter.drawText(left, top + metrics.ascent(), elided)
        parts = _first_mark_in_view(tuple(parts), metrics, width)
        self._draw_parts(painter, metrics, parts, left, top + line, width)
        painter.restore()

    def _draw_parts(
        self,
        painter: QPainter,
        metrics: QFontMetrics,
        parts: tuple[tuple[str, bool], ...],
        left: int,
        top: int,
        width: int,
    ) -> None:
        """The second line's parts left to right, marked ones on the mark's colour, the last
        one that does not fit ended with "…"."""
        x, right = left, left + width
        baseline = top + metrics.ascent()
        mark = QColor(FOUND_MARK[self.dark])
        for text, marked in parts:
            room = right - x
            if room <= metrics.horizontalAdvance("…"):
                break
            shown = text
            if metrics.horizontalAdvance(text) > room:
                shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, room)
            advance = metrics.horizontalAdvance(shown)
            if marked and shown:
                painter.save()
                painter.setRenderHint(QPainter.RenderHint.Antialiasing)
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(mark)
                painter.drawRoundedRect(QRectF(x - 1, top, advance + 2, metrics.height()), 3, 3)
                painter.restore()
            painter.drawText(x, baseline, shown)
            x += advance
            if shown != text:
                break
