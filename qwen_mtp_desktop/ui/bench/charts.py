"""Small charts drawn with QPainter (Qt Charts is not part of PySide6-Essentials): decode
speed per mode with min-max whiskers, acceptance by draft position per depth, and the
decoding methods compared per workload (prompt set) with each workload's winner.

Each chart paints into any rectangle (`paint`), so the same code draws the widget and the
PNG export (`render_image`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from qwen_mtp_desktop.ui.widgets.style import ACCENT

PLAIN_COLOR = "#8a93a6"
BEST_COLOR = "#2e9d57"
DIVERGED_COLOR = "#d93025"
LOOKUP_COLOR = "#e08a1e"
#: One shade per draft depth (n = 1, 2, 3, ...), from the accent towards more contrast with the
#: background: darker on a light one, lighter on a dark one, each at least 3:1 against it (a
#: dark ramp on a dark background left n = 3 and deeper navy on near-black).
DEPTH_COLORS = ("#6f7dff", "#4656e6", "#3040b8", "#1f2c8f", "#141c5c", "#0c1138")
DEPTH_COLORS_DARK = ("#5b6cff", "#7d8aff", "#9ea8ff", "#bcc3ff", "#d8dcff", "#eef0ff")


@dataclass(frozen=True)
class Bar:
    label: str
    median: float
    low: float
    high: float
    #: "plain", "mtp", "lookup" (prompt lookup), "best" (the recommended mode) or
    #: "diverged" (output changed).
    kind: str = "mtp"
    #: Shown under the label: "differs" when the output left plain decoding's.
    note: str = ""


@dataclass(frozen=True)
class Series:
    label: str
    #: Acceptance (0-1) at draft position 1, 2, ...
    values: tuple[float, ...]


def nice_ceiling(value: float) -> tuple[float, float]:
    """An axis maximum at or above `value` and a tick step: 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1.0, 0.25
    raw = value / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return step * math.ceil(value / step - 1e-9), step


class _Chart(QWidget):
    """Common frame: title, palette-aware colours, PNG rendering."""

    title = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(QSize(320, 230))
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.empty_text = "No results yet"

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(460, 280)

    def has_data(self) -> bool:
        return False

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.paint(painter, QRectF(self.rect()))
        painter.end()

    def render_image(self, size: QSize | None = None, ratio: float = 2.0) -> QImage:
        """The chart on a solid background, at `ratio` times `size` pixels (crisp in docs)."""
        size = size or QSize(max(self.width(), 460), max(self.height(), 280))
        image = QImage(
            round(size.width() * ratio), round(size.height() * ratio), QImage.Format.Format_ARGB32
        )
        image.setDevicePixelRatio(ratio)
        image.fill(self.palette().base().color())
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.paint(painter, QRectF(0, 0, size.width(), size.height()))
        painter.end()
        return image

    # --- drawing helpers ---

    def _text_color(self) -> QColor:
        return self.palette().text().color()

    def _muted(self) -> QColor:
        color = QColor(self._text_color())
        color.setAlphaF(0.6)
        return color

    def _grid(self) -> QColor:
        color = QColor(self._text_color())
        color.setAlphaF(0.12)
        return color

    def _font(self, size: float, bold: bool = False) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(size)
        font.setBold(bold)
        return font

    def title_height(self, width: float) -> float:
        """The height the title takes at `width`: it wraps on a narrow chart, never cut."""
        metrics = QFontMetricsF(self._font(10.5, bold=True))
        box = metrics.boundingRect(
            QRectF(0, 0, max(width - 16, 40), 1000), int(Qt.TextFlag.TextWordWrap), self.title
        )
        return max(22.0, math.ceil(box.height()) + 2)

    def paint(self, painter: QPainter, rect: QRectF) -> None:
        painter.setFont(self._font(10.5, bold=True))
        painter.setPen(self._text_color())
        title_h = self.title_height(rect.width())
        title_rect = QRectF(rect.left() + 8, rect.top() + 4, rect.width() - 16, title_h)
        painter.drawText(
            title_rect,
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
            | int(Qt.TextFlag.TextWordWrap),
            self.title,
        )
        body = rect.adjusted(8, title_h + 8, -8, -6)
        if not self.has_data():
            painter.setFont(self._font(9.5))
            painter.setPen(self._muted())
            painter.drawText(body, Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        self._paint_body(painter, body)

    def _paint_body(self, painter: QPainter, rect: QRectF) -> None:
        raise NotImplementedError

    def _axis(self, painter: QPainter, plot: QRectF, top: float, step: float, fmt: str) -> None:
        """Horizontal grid lines with labels on the left."""
        painter.setFont(self._font(8.5))
        metrics = QFontMetricsF(painter.font())
        value = 0.0
        while value <= top + step / 2:
            y = plot.bottom() - plot.height() * value / top
            painter.setPen(QPen(self._grid(), 1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(self._muted())
            text = fmt.format(value)
            width = metrics.horizontalAdvance(text)
            painter.drawText(QPointF(plot.left() - width - 6, y + metrics.ascent() / 2 - 1), text)
            value += step


class ThroughputChart(_Chart):
    """Decode tokens/s per mode: bar and its figure = the median, whisker = min-max. It shows
    speeds only: a speed-up under a bar (a median of per-round ratios) could contradict the
    bars (a ratio of medians), so speed-ups have their own chart (WorkloadChart) and the
    table; a note under a bar only says when its output differed."""

    title = "Decode speed: median tokens/s of the runs (whiskers: slowest to fastest run)"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bars: list[Bar] = []

    def set_bars(self, bars: Sequence[Bar]) -> None:
        self.bars = list(bars)
        self.update()

    def has_data(self) -> bool:
        return bool(self.bars)

    def _paint_body(self, painter: QPainter, rect: QRectF) -> None:
        top, step = nice_ceiling(max(b.high for b in self.bars) * 1.12)
        plot = rect.adjusted(44, 14, -4, -38)
        self._axis(painter, plot, top, step, "{:g}")
        slot = plot.width() / len(self.bars)
        width = min(slot * 0.56, 72)
        colors = {
            "plain": PLAIN_COLOR,
            "mtp": ACCENT,
            "lookup": LOOKUP_COLOR,
            "best": BEST_COLOR,
            "diverged": DIVERGED_COLOR,
        }
        metrics_small = QFontMetricsF(self._font(8.5))
        for index, bar in enumerate(self.bars):
            center = plot.left() + slot * (index + 0.5)

            def y(value: float) -> float:
                return plot.bottom() - plot.height() * max(value, 0.0) / top

            color = QColor(colors.get(bar.kind, ACCENT))
            body = QRectF(center - width / 2, y(bar.median), width, plot.bottom() - y(bar.median))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            painter.drawRoundedRect(body, 3, 3)
            if bar.kind == "diverged":
                painter.setBrush(QColor(255, 255, 255, 90))
                painter.drawRect(body.adjusted(0, 0, 0, 0))
            # Whisker: min to max.
            painter.setPen(QPen(self._text_color(), 1.4))
            painter.drawLine(QPointF(center, y(bar.low)), QPointF(center, y(bar.high)))
            cap = width * 0.22
            for value in (bar.low, bar.high):
                painter.drawLine(QPointF(center - cap, y(value)), QPointF(center + cap, y(value)))
            # The median's value: at the foot of the bar (clear of the whisker, which spans
            # min..max around the top), or above the whisker when the bar is too short.
            painter.setFont(self._font(8.5, bold=True))
            value_text = f"{bar.median:.0f}" if bar.median >= 10 else f"{bar.median:.1f}"
            text_w = max(metrics_small.horizontalAdvance(value_text) + 8, width)
            if body.height() >= 22:
                value_rect = QRectF(center - text_w / 2, body.bottom() - 19, text_w, 16)
                # A patch of the bar's colour under the figure, so a whisker reaching down to
                # a slow run never strikes through it.
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(color)
                painter.drawRect(value_rect.adjusted(2, 0, -2, 0))
                painter.setPen(QColor("white"))
            else:
                value_rect = QRectF(center - text_w / 2, y(bar.high) - 18, text_w, 16)
            painter.drawText(value_rect, Qt.AlignmentFlag.AlignCenter, value_text)
            painter.setFont(self._font(9, bold=bar.kind == "best"))
            painter.setPen(self._text_color())
            painter.drawText(
                QRectF(center - slot / 2, plot.bottom() + 4, slot, 16),
                Qt.AlignmentFlag.AlignCenter,
                bar.label,
            )
            if bar.note:
                painter.setFont(self._font(8.5))
                painter.setPen(
                    QColor(colors.get(bar.kind, ACCENT)) if bar.kind != "mtp" else self._muted()
                )
                painter.drawText(
                    QRectF(center - slot / 2, plot.bottom() + 19, slot, 16),
                    Qt.AlignmentFlag.AlignCenter,
                    bar.note,
                )


class AcceptanceChart(_Chart):
    """Share of decoding steps whose draft at position i was accepted, one bar group per
    position and one bar per depth."""

    title = "Acceptance by draft position"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.series: list[Series] = []
        self.empty_text = "No MTP runs yet"

    def set_series(self, series: Sequence[Series]) -> None:
        self.series = [s for s in series if s.values]
        self.update()

    def has_data(self) -> bool:
        return bool(self.series)

    def _paint_body(self, painter: QPainter, rect: QRectF) -> None:
        positions = max(len(s.values) for s in self.series)
        legend_h = 18
        plot = rect.adjusted(44, 14 + legend_h, -4, -22)
        self._axis(painter, plot, 1.0, 0.25, "{:.0%}")
        group = plot.width() / positions
        count = len(self.series)
        width = min(group * 0.8 / count, 36)
        for pos in range(positions):
            center = plot.left() + group * (pos + 0.5)
            start = center - width * count / 2
            for index, series in enumerate(self.series):
                if pos >= len(series.values):
                    continue
                value = max(0.0, min(series.values[pos], 1.0))
                height = plot.height() * value
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(QColor(self._depth_color(series, index)))
                painter.drawRect(
                    QRectF(start + index * width + 1, plot.bottom() - height, width - 2, height)
                )
                painter.setFont(self._font(7.5 if width < 30 else 8.5))
                if QFontMetricsF(painter.font()).horizontalAdvance("100%") > width:
                    continue  # too narrow for a label; the table has the numbers
                painter.setPen(self._muted())
                painter.drawText(
                    QRectF(start + index * width, plot.bottom() - height - 16, width, 14),
                    Qt.AlignmentFlag.AlignCenter,
                    f"{value:.0%}",
                )
            painter.setFont(self._font(9))
            painter.setPen(self._text_color())
            painter.drawText(
                QRectF(center - group / 2, plot.bottom() + 4, group, 16),
                Qt.AlignmentFlag.AlignCenter,
                f"draft {pos + 1}",
            )
        # Legend, top right.
        painter.setFont(self._font(8.5))
        metrics = QFontMetricsF(painter.font())
        x = plot.right()
        for index in reversed(range(count)):
            series = self.series[index]
            text_w = metrics.horizontalAdvance(series.label)
            x -= text_w
            painter.setPen(self._muted())
            painter.drawText(QPointF(x, rect.top() + 12), series.label)
            x -= 14
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(self._depth_color(series, index)))
            painter.drawRoundedRect(QRectF(x, rect.top() + 3, 10, 10), 2, 2)
            x -= 12

    def _depth_color(self, series: Series, index: int) -> str:
        dark = self.palette().base().color().lightness() < 128
        colors = DEPTH_COLORS_DARK if dark else DEPTH_COLORS
        depth = len(series.values)
        return colors[min(depth - 1, len(colors) - 1)] if depth else colors[index]


@dataclass(frozen=True)
class Workload:
    """One prompt set's methods: speed-up over plain decoding per method (plain = 1.0)."""

    name: str
    #: (method label, median speed-up, "plain" / "mtp" / "lookup"), plain first.
    methods: tuple[tuple[str, float, str], ...]
    #: The label of the method that won (the fastest identical one, or "plain").
    winner: str


class WorkloadChart(_Chart):
    """Speed-up over plain decoding per workload: one bar group per prompt set, one bar per
    method (plain, the best MTP depth, prompt lookup); the winner is outlined and named."""

    title = (
        "Speed-up over plain decoding per workload: median of the per-round ratios "
        "(winner outlined)"
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workloads: list[Workload] = []
        self.empty_text = "Benchmark to compare the methods per workload"

    def set_workloads(self, workloads: Sequence[Workload]) -> None:
        self.workloads = list(workloads)
        self.update()

    def has_data(self) -> bool:
        return bool(self.workloads)

    def _paint_body(self, painter: QPainter, rect: QRectF) -> None:
        colors = {"plain": PLAIN_COLOR, "mtp": ACCENT, "lookup": LOOKUP_COLOR}
        highest = max(value for w in self.workloads for _l, value, _k in w.methods)
        top, step = nice_ceiling(max(highest, 1.0) * 1.15)
        legend_h = 18
        plot = rect.adjusted(44, 14 + legend_h, -4, -40)
        self._axis(painter, plot, top, step, "{:g}x")
        # Plain decoding's level, across the whole plot.
        one = plot.bottom() - plot.height() / top
        painter.setPen(QPen(QColor(PLAIN_COLOR), 1, Qt.PenStyle.DashLine))
        painter.drawLine(QPointF(plot.left(), one), QPointF(plot.right(), one))
        group = plot.width() / len(self.workloads)
        for index, workload in enumerate(self.workloads):
            center = plot.left() + group * (index + 0.5)
            count = len(workload.methods)
            width = min(group * 0.8 / count, 40)
            start = center - width * count / 2
            for position, (label, value, kind) in enumerate(workload.methods):
                height = plot.height() * max(value, 0.0) / top
                body = QRectF(
                    start + position * width + 1, plot.bottom() - height, width - 2, height
                )
                painter.setBrush(QColor(colors.get(kind, ACCENT)))
                if label == workload.winner:
                    painter.setPen(QPen(QColor(BEST_COLOR), 2.4))
                else:
                    painter.setPen(Qt.PenStyle.NoPen)
                painter.drawRect(body)
                painter.setFont(self._font(7.5 if width < 30 else 8.5))
                text = f"{value:.2f}"
                if QFontMetricsF(painter.font()).horizontalAdvance(text) <= width + 6:
                    painter.setPen(self._muted())
                    painter.drawText(
                        QRectF(body.left() - 3, body.top() - 15, width + 6, 14),
                        Qt.AlignmentFlag.AlignCenter,
                        text,
                    )
            painter.setFont(self._font(9, bold=True))
            painter.setPen(self._text_color())
            painter.drawText(
                QRectF(center - group / 2, plot.bottom() + 4, group, 16),
                Qt.AlignmentFlag.AlignCenter,
                workload.name,
            )
            painter.setFont(self._font(8.5))
            painter.setPen(QColor(BEST_COLOR))
            # Narrow groups (many workloads, a small window): the name is elided, not cut.
            winner = QFontMetricsF(painter.font()).elidedText(
                f"winner: {workload.winner}", Qt.TextElideMode.ElideRight, group - 4
            )
            painter.drawText(
                QRectF(center - group / 2, plot.bottom() + 20, group, 16),
                Qt.AlignmentFlag.AlignCenter,
                winner,
            )
        # Legend, top right: one swatch per kind of method.
        painter.setFont(self._font(8.5))
        metrics = QFontMetricsF(painter.font())
        x = plot.right()
        for text, kind in (("prompt lookup", "lookup"), ("best MTP", "mtp"), ("plain", "plain")):
            x -= metrics.horizontalAdvance(text)
            painter.setPen(self._muted())
            painter.drawText(QPointF(x, rect.top() + 12), text)
            x -= 14
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(colors[kind]))
            painter.drawRoundedRect(QRectF(x, rect.top() + 3, 10, 10), 2, 2)
            x -= 12
