"""A layout that places widgets left to right and wraps onto the next line when the width runs
out (Qt's FlowLayout example), so a row of buttons stays whole on a narrow window."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QBoxLayout, QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, spacing: int = 8) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 (Qt override)
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 (Qt override)
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 (Qt override)
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 (Qt override)
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 (Qt override)
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        # One line: the width it would like; heightForWidth gives the wrapped height.
        width = sum(item.sizeHint().width() for item in self._visible())
        width += self._spacing * max(len(self._visible()) - 1, 0)
        height = max((item.sizeHint().height() for item in self._visible()), default=0)
        margins = self.contentsMargins()
        return QSize(
            width + margins.left() + margins.right(), height + margins.top() + margins.bottom()
        )

    def minimumSize(self) -> QSize:  # noqa: N802 (Qt override)
        # The widest single item: everything else wraps.
        size = QSize()
        for item in self._visible():
            size = size.expandedTo(item.minimumSize())
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def _visible(self) -> list[QLayoutItem]:
        shown: list[QLayoutItem] = []
        for item in self._items:
            widget = item.widget()
            if widget is None or not widget.isHidden():
                shown.append(item)
        return shown

    def _place(self, rect: QRect, *, move: bool) -> int:
        margins = self.contentsMargins()
        area = rect.marginsRemoved(margins)
        x, y, line_height = area.x(), area.y(), 0
        for item in self._visible():
            hint = item.sizeHint()
            if x + hint.width() > area.right() + 1 and line_height > 0:
                x = area.x()
                y += line_height + self._spacing
                line_height = 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            line_height = max(line_height, hint.height())
        return y + line_height - rect.y() + margins.bottom()


class ResponsiveRow(QBoxLayout):
    """A row that turns into a column when it is narrower than `min_width` (e.g. two charts
    side by side on a wide window, one above the other on a small one)."""

    def __init__(self, parent: QWidget | None = None, *, min_width: int) -> None:
        super().__init__(QBoxLayout.Direction.LeftToRight, parent)
        self._min_width = min_width
        self.setContentsMargins(0, 0, 0, 0)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 (Qt override)
        wanted = (
            QBoxLayout.Direction.LeftToRight
            if rect.width() >= self._min_width
            else QBoxLayout.Direction.TopToBottom
        )
        if wanted != self.direction():
            self.setDirection(wanted)
        super().setGeometry(rect)
