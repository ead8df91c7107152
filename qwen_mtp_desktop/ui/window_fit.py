"""The main window's geometry fitted to the screen it opens on, on every start (issue 28).

A first start asks for 1280x800; a restored start asks for what was saved, which may come from
a larger screen or one that is no longer connected. Either way the window, its frame included,
must end up inside one screen's available area (the desktop minus panels and docks), or the
message box and Send can be off screen on a 1024x700 display.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PySide6.QtCore import QMargins, QPoint, QRect, QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QStyle, QWidget

log = logging.getLogger(__name__)

#: A first start's size on a screen large enough for it.
DEFAULT_SIZE = QSize(1280, 800)


def fitted_geometry(
    wanted: QRect | None,
    screens: Sequence[QRect],
    frame: QMargins,
    default: QSize = DEFAULT_SIZE,
    minimum: QSize | None = None,
) -> QRect:
    """Where the window goes: `wanted` (a restored geometry, without its frame) moved and
    shrunk only as far as needed so that it and its `frame` fit inside one of `screens` (the
    available areas, the primary first). The screen is the one `wanted` overlaps most; a
    geometry off every screen, or none at all, is centred on the primary screen at its size (or
    `default`), shrunk to fit. A size below `minimum` grows to it where the screen has room."""
    size = wanted.size() if wanted is not None and wanted.isValid() else QSize(default)
    if minimum is not None:
        size = size.expandedTo(minimum)
    if not screens:
        return QRect(wanted.topLeft() if wanted is not None else QPoint(0, 0), size)
    screen, overlap = screens[0], 0
    if wanted is not None and wanted.isValid():
        framed = wanted.marginsAdded(frame)
        for candidate in screens:
            shared = framed.intersected(candidate)
            area = shared.width() * shared.height() if shared.isValid() else 0
            if area > overlap:
                screen, overlap = candidate, area
    room = screen.marginsRemoved(frame).size()
    size = size.boundedTo(room).expandedTo(QSize(1, 1))
    if overlap == 0:  # first start, or off every screen: centred
        left = screen.left() + frame.left() + (room.width() - size.width()) // 2
        top = screen.top() + frame.top() + (room.height() - size.height()) // 2
        return QRect(QPoint(left, top), size)
    assert wanted is not None
    # The least move that brings the framed window fully inside the screen.
    lowest_left = screen.left() + frame.left()
    highest_left = screen.right() - frame.right() - size.width() + 1
    lowest_top = screen.top() + frame.top()
    highest_top = screen.bottom() - frame.bottom() - size.height() + 1
    left = min(max(wanted.left(), lowest_left), max(highest_left, lowest_left))
    top = min(max(wanted.top(), lowest_top), max(highest_top, lowest_top))
    return QRect(QPoint(left, top), size)


def estimated_frame(window: QWidget) -> QMargins:
    """The frame the window system will draw around the window: its real one once shown, or
    before that a title bar and thin borders as the style draws them (what Qt's own
    restoreGeometry assumes)."""
    if window.isVisible():
        outer, inner = window.frameGeometry(), window.geometry()
        margins = QMargins(
            inner.left() - outer.left(),
            inner.top() - outer.top(),
            outer.right() - inner.right(),
            outer.bottom() - inner.bottom(),
        )
        if min(margins.left(), margins.top(), margins.right(), margins.bottom()) >= 0:
            return margins
    style = window.style() or QApplication.style()
    title = style.pixelMetric(QStyle.PixelMetric.PM_TitleBarHeight) if style else 24
    border = 4
    return QMargins(border, title + border, border, border)


def available_screens() -> list[QRect]:
    """Every screen's available area, the primary first."""
    primary = QGuiApplication.primaryScreen()
    screens = QGuiApplication.screens()
    ordered = ([primary] if primary is not None else []) + [s for s in screens if s is not primary]
    return [screen.availableGeometry() for screen in ordered]


def fit_window(window: QWidget, wanted: QRect | None) -> QRect:
    """Place `window` (maximised and full-screen windows excepted: the window system sizes
    those) at `fitted_geometry`, lowering its minimum size on a screen smaller than it; returns
    the geometry it was given."""
    if window.isMaximized() or window.isFullScreen():
        return window.geometry()
    screens = available_screens()
    frame = estimated_frame(window)
    rect = fitted_geometry(wanted, screens, frame, minimum=window.minimumSize())
    if screens:
        screen = next((s for s in screens if s.intersects(rect)), screens[0])
        room = screen.marginsRemoved(frame).size().expandedTo(QSize(1, 1))
        window.setMinimumSize(window.minimumSize().boundedTo(room))
    window.setGeometry(rect)
    log.info(
        "window placed %s (asked %s; frame %d/%d/%d/%d; screens %s)",
        _describe(rect),
        "a first start's size" if wanted is None else _describe(wanted),
        frame.left(),
        frame.top(),
        frame.right(),
        frame.bottom(),
        ", ".join(_describe(screen) for screen in screens) or "none",
    )
    return rect


def refit_if_outside(window: QWidget) -> None:
    """After the first show, when the real frame is known: move or shrink the window if its
    frame reaches outside every screen's available area (a window manager's frame larger than
    estimated)."""
    frame = window.frameGeometry()
    if window.isMaximized() or window.isFullScreen():
        return
    if any(screen.contains(frame) for screen in available_screens()):
        return
    fit_window(window, window.geometry())


def _describe(rect: QRect) -> str:
    return f"{rect.width()}x{rect.height()}+{rect.left()}+{rect.top()}"


def fit_dialog(dialog: QWidget, wanted: QSize) -> QSize:
    """Give `dialog` the size its content wants (`wanted`), within the window it opens over
    (or the screen, without one), and centre it there: a dialog of a fixed size is cut on a
    small window and cramped on a large one. Returns the size it got."""
    parent = dialog.parentWidget()
    if parent is not None:
        area = parent.window().frameGeometry()
    else:
        screen = dialog.screen() or QGuiApplication.primaryScreen()
        area = screen.availableGeometry() if screen is not None else QRect(0, 0, 1024, 700)
    frame = estimated_frame(dialog)
    room = area.marginsRemoved(frame).size()
    size = wanted.expandedTo(dialog.minimumSizeHint()).boundedTo(room)
    dialog.setMinimumSize(dialog.minimumSize().boundedTo(room))
    dialog.resize(size)
    # move() places a window's frame: centre the frame on the area.
    outer = size.grownBy(frame)
    dialog.move(
        area.left() + (area.width() - outer.width()) // 2,
        area.top() + (area.height() - outer.height()) // 2,
    )
    return size
