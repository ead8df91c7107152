"""The main window's geometry on start (issue 28): whatever was saved and whatever the screens,
the window and its frame end up inside one screen's available area, moved and shrunk no more
than needed."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QMargins, QRect, QSize

from qwen_mtp_desktop.ui.window_fit import DEFAULT_SIZE, fitted_geometry

FRAME = QMargins(4, 28, 4, 4)


def _inside_one(rect: QRect, frame: QMargins, screens: list[QRect]) -> bool:
    return any(screen.contains(rect.marginsAdded(frame)) for screen in screens)


@st.composite
def screen_layouts(draw: st.DrawFn) -> list[QRect]:
    """1-3 screens side by side (left to right or stacked), each 320x240 to 3840x2160, with
    an offset for panels and docks."""
    count = draw(st.integers(1, 3))
    screens: list[QRect] = []
    x = draw(st.integers(-4000, 4000))
    y = draw(st.integers(-3000, 3000))
    for _ in range(count):
        width, height = draw(st.integers(320, 3840)), draw(st.integers(240, 2160))
        screens.append(QRect(x, y + draw(st.integers(0, 60)), width, height))
        if draw(st.booleans()):
            x += width
        else:
            y += height + 60
    return screens


rects = st.builds(
    QRect,
    st.integers(-20_000, 20_000),
    st.integers(-20_000, 20_000),
    st.integers(1, 8000),
    st.integers(1, 8000),
)
frames = st.builds(
    QMargins, st.integers(0, 12), st.integers(0, 48), st.integers(0, 12), st.integers(0, 12)
)


@settings(max_examples=400)
@given(screens=screen_layouts(), wanted=st.none() | rects, frame=frames)
@example(screens=[QRect(0, 0, 1024, 700)], wanted=None, frame=FRAME)  # issue 28's screen
@example(  # saved on a 2560x1440 screen, opened on 1024x700
    screens=[QRect(0, 0, 1024, 700)], wanted=QRect(640, 332, 1280, 800), frame=FRAME
)
@example(  # saved on a second screen that is gone
    screens=[QRect(0, 0, 1024, 700)], wanted=QRect(3000, 200, 1280, 800), frame=FRAME
)
def test_the_window_and_its_frame_fit_one_screen(
    screens: list[QRect], wanted: QRect | None, frame: QMargins
) -> None:
    fitted = fitted_geometry(wanted, screens, frame)
    assert fitted.isValid()
    assert _inside_one(fitted, frame, screens), (fitted, screens)
    asked = wanted.size() if wanted is not None else DEFAULT_SIZE
    assert fitted.width() <= asked.width() and fitted.height() <= asked.height()
    # Shrunk only to the room the screen leaves: a side that was cut fills that screen.
    screen = next(s for s in screens if s.contains(fitted.marginsAdded(frame)))
    room = screen.marginsRemoved(frame).size()
    if fitted.width() < asked.width():
        assert fitted.width() == room.width()
    if fitted.height() < asked.height():
        assert fitted.height() == room.height()


@settings(max_examples=200)
@given(screens=screen_layouts(), data=st.data(), frame=frames)
def test_a_geometry_that_already_fits_is_kept(
    screens: list[QRect], data: st.DataObject, frame: QMargins
) -> None:
    screen = data.draw(st.sampled_from(screens))
    room = screen.marginsRemoved(frame)
    width = data.draw(st.integers(1, room.width()))
    height = data.draw(st.integers(1, room.height()))
    left = data.draw(st.integers(room.left(), room.right() - width + 1))
    top = data.draw(st.integers(room.top(), room.bottom() - height + 1))
    wanted = QRect(left, top, width, height)
    assert fitted_geometry(wanted, screens, frame) == wanted


def test_a_first_start_is_centred_at_its_size_or_the_screens() -> None:
    large = QRect(0, 0, 2560, 1440)
    assert fitted_geometry(None, [large], FRAME) == QRect(640, 332, 1280, 800)
    small = QRect(0, 0, 1024, 700)
    assert fitted_geometry(None, [small], FRAME) == QRect(4, 28, 1016, 668)


def test_a_geometry_off_every_screen_opens_centred_on_the_primary() -> None:
    primary, other = QRect(0, 0, 1024, 700), QRect(-1920, 0, 1920, 1080)
    fitted = fitted_geometry(QRect(5000, 5000, 900, 600), [primary, other], FRAME)
    assert fitted == QRect(62, 62, 900, 600)


def test_a_geometry_is_kept_on_the_screen_it_overlaps_most() -> None:
    left, right = QRect(0, 0, 1920, 1080), QRect(1920, 0, 1280, 1024)
    # Mostly on the right screen and too tall for it: moved up and shrunk there.
    fitted = fitted_geometry(QRect(1800, 100, 1100, 1200), [left, right], FRAME)
    assert right.contains(fitted.marginsAdded(FRAME))
    assert fitted.size() == QSize(1100, 1024 - 32)


def test_a_size_below_the_minimum_grows_to_it_where_it_fits() -> None:
    screen = QRect(0, 0, 1600, 1000)
    fitted = fitted_geometry(QRect(100, 100, 200, 100), [screen], FRAME, minimum=QSize(760, 520))
    assert fitted.size() == QSize(760, 520)
    assert screen.contains(fitted.marginsAdded(FRAME))


def test_no_screen_keeps_what_was_asked() -> None:
    assert fitted_geometry(QRect(10, 20, 300, 200), [], FRAME) == QRect(10, 20, 300, 200)
