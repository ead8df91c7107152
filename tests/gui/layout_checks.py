"""What a user would find cut off on screen, found on real widgets (issue 25 item 8, issue 28).

Each check walks the visible widgets under a root and returns one readable line per problem:
- buttons outside the window, cut by a parent, or narrower than their text;
- labels whose text does not fit: a one-line label narrower than its text, a wrapping label
  shorter than its wrapped text or narrower than its longest word; a label shortened on purpose
  (an `ElidedLabel`) must carry the whole text as its tooltip;
- tables and trees with a cell or header narrower than its text (a name cut mid-word is a
  problem even with a tooltip); lists with an item narrower than its text unless the item's
  tooltip holds it (a long path, say);
- combo boxes whose current text does not fit their field, unless the tooltip holds it;
- any horizontal scroll bar.
Below the fold of a vertical scroll area counts as shown (the user scrolls to it); wider than
the area does not.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint, QRect, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QComboBox,
    QHeaderView,
    QLabel,
    QListView,
    QStyle,
    QStyleOptionComboBox,
    QTableView,
    QTreeView,
    QWidget,
)

from qwen_mtp_desktop.ui.widgets.elided_label import ElidedLabel

#: Pixels of slack for rounding in size hints.
SLACK = 2


def rect_in(widget: QWidget, window: QWidget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def scroll_viewport(widget: QWidget, stop: QWidget) -> QWidget | None:
    """The viewport of the scroll area `widget` sits in below `stop`, if any."""
    parent = widget.parentWidget()
    while parent is not None and parent is not stop:
        if isinstance(parent, QAbstractScrollArea) and parent.viewport().isAncestorOf(widget):
            return parent.viewport()
        parent = parent.parentWidget()
    return None


def _name(widget: QWidget, text: str) -> str:
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{type(widget).__name__} {shown!r}"


def _placement(widget: QWidget, window: QWidget, root: QWidget, name: str) -> str | None:
    """Why `widget` is not fully on screen, or None."""
    rect = rect_in(widget, window)
    viewport = scroll_viewport(widget, root)
    if viewport is not None:
        area = rect_in(viewport, window)
        if rect.left() < area.left() - SLACK or rect.right() > area.right() + SLACK:
            return f"{name} at {rect.getRect()} is wider than its scroll area {area.getRect()}"
        return None
    if not window.rect().contains(rect):
        return f"{name} at {rect.getRect()} is outside the window {window.size().toTuple()}"
    parent = widget.parentWidget()
    while parent is not None and parent is not window:
        if not rect_in(parent, window).contains(rect):
            return f"{name} is cut off by {type(parent).__name__} {parent.objectName()!r}"
        parent = parent.parentWidget()
    return None


def _shown(widget: QWidget, window: QWidget) -> bool:
    return widget.isVisibleTo(window) and widget.width() > 0 and widget.height() > 0


def clipped_buttons(window: QWidget, root: QWidget) -> list[str]:
    problems: list[str] = []
    for button in root.findChildren(QAbstractButton):
        if not _shown(button, window) or isinstance(button.parentWidget(), QHeaderView):
            continue
        name = _name(button, button.text() or button.toolTip() or button.objectName())
        if button.width() < button.minimumSizeHint().width():
            problems.append(
                f"{name} is {button.width()} px wide, its text needs "
                f"{button.minimumSizeHint().width()} px"
            )
            continue
        placed = _placement(button, window, root, name)
        if placed:
            problems.append(placed)
    return problems


def cut_labels(window: QWidget, root: QWidget) -> list[str]:
    problems: list[str] = []
    for label in root.findChildren(QLabel):
        text = label.text()
        if not _shown(label, window) or not text.strip():
            continue
        name = _name(label, text)
        if isinstance(label, ElidedLabel):  # shortened on purpose: the tooltip has it all
            if label.toolTip() != text:
                problems.append(f"{name} is shortened without its whole text as tooltip")
        elif label.wordWrap():
            needed = label.heightForWidth(label.width())
            if needed > label.height() + SLACK:
                problems.append(
                    f"{name} needs {needed} px of height at {label.width()} px, has "
                    f"{label.height()}"
                )
            elif label.minimumSizeHint().width() > label.width() + SLACK:
                problems.append(
                    f"{name} has a word {label.minimumSizeHint().width()} px wide in "
                    f"{label.width()} px"
                )
        elif label.sizeHint().width() > label.width() + SLACK:
            problems.append(
                f"{name} is {label.width()} px wide, its text needs {label.sizeHint().width()}"
            )
        placed = _placement(label, window, root, name)
        if placed:
            problems.append(placed)
    return problems


def _whole_text_in_tooltip(index: QModelIndex, text: str) -> bool:
    tip = index.data(Qt.ItemDataRole.ToolTipRole)
    return isinstance(tip, str) and text in tip


def cut_cells(window: QWidget, root: QWidget) -> list[str]:
    problems: list[str] = []
    for view in root.findChildren(QAbstractItemView):
        model = view.model()
        if not _shown(view, window) or model is None:
            continue
        if isinstance(view, QTableView | QTreeView):
            header = view.horizontalHeader() if isinstance(view, QTableView) else view.header()
            for column in range(model.columnCount()):
                if header.isSectionHidden(column) or header.sectionSize(column) == 0:
                    continue
                width = header.sectionSize(column)
                title = model.headerData(column, Qt.Orientation.Horizontal)
                if header.isVisible() and header.sectionSizeHint(column) > width + SLACK:
                    problems.append(
                        f"{type(view).__name__} header {title!r} is {width} px, needs "
                        f"{header.sectionSizeHint(column)}"
                    )
                for row in range(min(model.rowCount(), 100)):
                    index = model.index(row, column)
                    text = index.data(Qt.ItemDataRole.DisplayRole)
                    if not isinstance(text, str) or not text:
                        continue
                    room = width
                    if isinstance(view, QTreeView) and column == 0 and view.rootIsDecorated():
                        room -= view.indentation()
                    needed = view.sizeHintForIndex(index).width()
                    if needed > room + SLACK:  # a cut name or figure, tooltip or not
                        problems.append(
                            f"{type(view).__name__} cell {text!r} (column {title!r}) is "
                            f"{room} px, needs {needed}"
                        )
        elif isinstance(view, QListView) and not view.isWrapping():
            room = view.viewport().width()
            for row in range(min(model.rowCount(), 100)):
                index = model.index(row, 0)
                text = index.data(Qt.ItemDataRole.DisplayRole)
                if not isinstance(text, str) or not text:
                    continue
                if view.wordWrap():  # wraps: the row must be tall enough for its lines
                    rect = view.visualRect(index)
                    box = view.fontMetrics().boundingRect(
                        QRect(0, 0, max(rect.width() - 2 * SLACK - view.iconSize().width(), 1),
                              10_000),
                        int(Qt.TextFlag.TextWordWrap),
                        text,
                    )  # fmt: skip
                    if rect.isValid() and box.height() > rect.height() + SLACK:
                        problems.append(
                            f"{type(view).__name__} item {text!r} needs {box.height()} px of "
                            f"height, has {rect.height()}"
                        )
                    continue
                needed = view.sizeHintForIndex(index).width()
                if needed > room + SLACK and not _whole_text_in_tooltip(index, text):
                    problems.append(
                        f"{type(view).__name__} item {text!r} is {room} px, needs {needed}"
                    )
    return problems


def cut_combos(window: QWidget, root: QWidget) -> list[str]:
    problems: list[str] = []
    for combo in root.findChildren(QComboBox):
        text = combo.currentText()
        if not _shown(combo, window) or not text or combo.isEditable():
            continue
        option = QStyleOptionComboBox()
        combo.initStyleOption(option)
        field = combo.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, combo
        )
        needed = combo.fontMetrics().horizontalAdvance(text)
        tip = combo.currentData(Qt.ItemDataRole.ToolTipRole) or combo.toolTip()
        if needed > field.width() + SLACK and text not in str(tip):
            problems.append(f"{_name(combo, text)}: field {field.width()} px, text {needed} px")
    return problems


def horizontal_scrollbars(window: QWidget, root: QWidget) -> list[str]:
    problems: list[str] = []
    areas = [root] if isinstance(root, QAbstractScrollArea) else []
    for area in [*areas, *root.findChildren(QAbstractScrollArea)]:
        bar = area.horizontalScrollBar()
        if _shown(area, window) and bar.isVisibleTo(window) and bar.maximum() > 0:
            what = area.objectName() or type(area).__name__
            problems.append(f"{what} scrolls sideways ({bar.maximum()} px hidden)")
    return problems


def layout_problems(window: QWidget, root: QWidget) -> list[str]:
    """Every check above on `root` (a panel or a dialog) shown in `window`."""
    return [
        *clipped_buttons(window, root),
        *cut_labels(window, root),
        *cut_cells(window, root),
        *cut_combos(window, root),
        *horizontal_scrollbars(window, root),
    ]
