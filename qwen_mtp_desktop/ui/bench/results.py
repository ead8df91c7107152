"""The Benchmark page's results: the verdict banner, the charts, the table and the run's
details for one report (or for one prompt set of it), and the charts as one image for export.

Widgets only: what to show comes from ui.bench.report_view (plain data from the report).

Signals:
    export_requested(str): the user asked to export the report ("md", "json" or "png").
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.measure.fullsize_figures import full_size_details
from qwen_mtp_desktop.core.measure.records import ModeSummary, Report, ValidationReport
from qwen_mtp_desktop.core.measure.reports import fmt, fmt_spread
from qwen_mtp_desktop.core.measure.validate import method_label
from qwen_mtp_desktop.core.measure.verdicts import row_method
from qwen_mtp_desktop.core.units import format_bytes, keep_units
from qwen_mtp_desktop.ui.bench.charts import AcceptanceChart, ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.bench.look import STATUS_COLORS
from qwen_mtp_desktop.ui.bench.report_view import (
    chart_data,
    is_demo_report,
    local_time,
    verdict,
    workload_data,
)
from qwen_mtp_desktop.ui.figures import COLUMN_HELP
from qwen_mtp_desktop.ui.widgets.flow_layout import FlowLayout, ResponsiveRow

#: Below this width the two charts go one above the other, so their titles stay whole.
CHARTS_SIDE_BY_SIDE_MIN = 760


class BenchResults(QScrollArea):
    """One report on screen; see the module docstring for its signal."""

    export_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: Report | None = None
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(12, 6, 4, 4)
        layout.setSpacing(10)

        self.banner = QFrame()
        self.banner.setObjectName("benchBanner")
        banner_layout = QVBoxLayout(self.banner)
        banner_layout.setContentsMargins(14, 10, 14, 10)
        banner_layout.setSpacing(4)
        self.banner_title = QLabel()
        self.banner_title.setObjectName("bannerTitle")
        self.banner_title.setWordWrap(True)  # "Recommended: plain decoding (MTP and ...)"
        self.banner_detail = QLabel()
        self.banner_detail.setWordWrap(True)
        self.banner_detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        banner_layout.addWidget(self.banner_title)
        banner_layout.addWidget(self.banner_detail)
        layout.addWidget(self.banner)

        view_widget = QWidget()
        view_row = FlowLayout(view_widget)  # wraps on a narrow window instead of clipping
        self.view_set_label = QLabel("Show prompt set")
        self.view_set_label.setObjectName("formLabel")
        self.view_set_combo = QComboBox()
        self.view_set_combo.currentIndexChanged.connect(self._on_view_set_changed)
        view_row.addWidget(self.view_set_label)
        view_row.addWidget(self.view_set_combo)
        export_label = QLabel("Export")
        export_label.setObjectName("formLabel")
        view_row.addWidget(export_label)
        self.export_md_button = QPushButton("Markdown…")
        self.export_md_button.clicked.connect(lambda: self.export_requested.emit("md"))
        self.export_json_button = QPushButton("JSON…")
        self.export_json_button.clicked.connect(lambda: self.export_requested.emit("json"))
        self.export_png_button = QPushButton("Charts (PNG)…")
        self.export_png_button.clicked.connect(lambda: self.export_requested.emit("png"))
        for button in (self.export_md_button, self.export_json_button, self.export_png_button):
            view_row.addWidget(button)
        layout.addWidget(view_widget)

        self.charts = QWidget()
        # Side by side when there is room, one above the other when not (titles stay whole).
        charts_layout = ResponsiveRow(self.charts, min_width=CHARTS_SIDE_BY_SIDE_MIN)
        charts_layout.setContentsMargins(0, 0, 0, 0)
        charts_layout.setSpacing(12)
        self.throughput_chart = ThroughputChart()
        self.acceptance_chart = AcceptanceChart()
        charts_layout.addWidget(self.throughput_chart, 3)
        charts_layout.addWidget(self.acceptance_chart, 2)
        layout.addWidget(self.charts)
        self.workload_chart = WorkloadChart()
        self.workload_chart.setVisible(False)
        layout.addWidget(self.workload_chart)

        self.table = QTableWidget()
        self.table.setObjectName("benchTable")
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
        self.table.setWordWrap(False)
        layout.addWidget(self.table)

        self.meta_label = QLabel()
        self.meta_label.setObjectName("muted")
        self.meta_label.setWordWrap(True)
        self.meta_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.meta_label)

        layout.addStretch(1)

        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidget(content)

    def show_report(self, report: Report | None) -> None:
        """Show `report` (None: the empty state with what to do first)."""
        self.report = report
        has = report is not None
        for widget in (
            self.export_md_button,
            self.export_json_button,
            self.export_png_button,
        ):
            widget.setEnabled(has)
        if report is None:
            self.banner.setProperty("status", "info")
            self.banner_title.setText("No results yet")
            self.banner_detail.setText(
                "Validate first: it proves MTP changes nothing in the output. Then Benchmark "
                "finds the fastest draft depth on this computer."
            )
            self.view_set_label.setVisible(False)
            self.view_set_combo.setVisible(False)
            self.throughput_chart.set_bars([])
            self.acceptance_chart.set_series([])
            self.workload_chart.set_workloads([])
            self.workload_chart.setVisible(False)
            self.table.clear()
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            self.table.setVisible(False)
            self.meta_label.setText("")
            self._repolish(self.banner)
            return
        status, title, detail = verdict(report)
        self.banner.setProperty("status", status)
        self.banner_title.setText(title)
        self.banner_detail.setText(keep_units(detail))
        self.banner_detail.setToolTip(full_size_details() if is_demo_report(report) else "")
        self._repolish(self.banner)
        sets = [e["prompt_set"] for e in report["per_set"]] if report["kind"] == "bench" else []
        self.view_set_combo.blockSignals(True)
        self.view_set_combo.clear()
        if len(sets) > 1:
            self.view_set_combo.addItem("All sets", None)
            for name in sets:
                self.view_set_combo.addItem(name, name)
        self.view_set_combo.blockSignals(False)
        self.view_set_label.setVisible(len(sets) > 1)
        self.view_set_combo.setVisible(len(sets) > 1)
        workloads = workload_data(report)
        self.workload_chart.set_workloads(workloads)
        self.workload_chart.setVisible(bool(workloads))
        self._show_set(None)
        self.meta_label.setText(keep_units(self._meta_text(report)))

    def _on_view_set_changed(self) -> None:
        self._show_set(self.view_set_combo.currentData())

    def _show_set(self, prompt_set: str | None) -> None:
        report = self.report
        if report is None:
            return
        bars, series = chart_data(report, prompt_set)
        if report["kind"] != "validate":
            self.throughput_chart.empty_text = "No results"
        elif report["summary"]["all_identical"]:
            self.throughput_chart.empty_text = "Not timed (validation ran without timing)"
        else:
            self.throughput_chart.empty_text = "Not timed: the outputs differ"
        self.throughput_chart.set_bars(bars)
        self.acceptance_chart.set_series(series)
        if report["kind"] == "validate":
            self._fill_validation_table(report)
        else:
            modes = report["modes"]
            if prompt_set is not None:
                modes = next(e["modes"] for e in report["per_set"] if e["prompt_set"] == prompt_set)
            self._fill_bench_table(modes, row_method(report["recommendation"]))

    def _fill_table(self, headers: list[str], rows: list[list[str]], bold_row: int = -1) -> None:
        self.table.clear()
        self.table.setVisible(True)
        self.table.setColumnCount(len(headers))
        self.table.setRowCount(len(rows))
        self.table.setHorizontalHeaderLabels(headers)
        for column, name in enumerate(headers):
            header_item = self.table.horizontalHeaderItem(column)
            if header_item is not None:
                header_item.setToolTip(COLUMN_HELP.get(name.replace("\n", " "), ""))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                if c == 0:
                    item.setToolTip(text)  # the full mode name where the column is narrow
                if c > 0:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if r == bold_row:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                if text in ("no", "differs"):
                    item.setForeground(QColor(STATUS_COLORS["error"]))
                self.table.setItem(r, c, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        first = self.table.horizontalHeaderItem(0)
        if first is not None:
            first.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.table.setWordWrap(True)
        self.table.resizeColumnsToContents()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.resizeRowsToContents()
        # The header's hint, not its height: two-line headers are not laid out yet here.
        height = self.table.horizontalHeader().sizeHint().height() + 2 * self.table.frameWidth()
        height += 2
        height += sum(self.table.rowHeight(r) for r in range(len(rows)))
        self.table.setFixedHeight(height)

    def _fill_bench_table(self, modes: list[ModeSummary], best: DecodingMethod) -> None:
        """One row per mode; the recommended MTP depth in bold."""
        rows = []
        bold = -1
        for index, mode in enumerate(modes):
            method = row_method(mode)
            if not best.is_plain and method == best:
                bold = index
            plain = method.is_plain
            speedup = "1.00x" if plain else fmt_spread(mode["speedup"], "{:.2f}x")
            rows.append(
                [
                    # Two lines for a long name ("prompt lookup K=4,\nn-gram 3"), as the
                    # headers: the figures beside it are narrower.
                    mode["label"].replace(", ", ",\n"),
                    fmt_spread(mode["decode_tokens_per_s"]),
                    speedup,
                    fmt_spread(mode["ttft_s"], "{:.0f}", 1000),
                    fmt(mode["acceptance_rate"], "{:.0%}"),
                    fmt(mode["mean_accepted_per_step"], "{:.2f}"),
                    ", ".join(f"{p:.0%}" for p in mode["acceptance_by_position"]) or "–",
                    "yes" if mode["identical"] else "no",
                ]
            )
        self._fill_table(
            [
                # Two-line headers: the figures are narrower than their names.
                "Method",
                "Decode tok/s\n(min–max)",
                "Speed-up\n(min–max)",
                "TTFT ms",
                "Accepted",
                "Per step",
                "By position",
                "Identical",
            ],
            rows,
            bold,
        )

    def _fill_validation_table(self, report: ValidationReport) -> None:
        rows = []
        for result in report["results"]:
            timing = result["timing"]
            div = result["divergence"]
            rows.append(
                [
                    result["prompt"].replace("\n", " ")[:70],
                    "yes" if result["identical"] else "no",
                    "–" if div is None else f"token {div['position']}",
                    fmt(result["mtp"]["acceptance_rate"], "{:.0%}"),
                    fmt(timing and timing["baseline"]["decode_tokens_per_s"]),
                    fmt(timing and timing["mtp"]["decode_tokens_per_s"]),
                    fmt(timing and timing["speedup"], "{:.2f}x"),
                ]
            )
        self._fill_table(
            [
                "Prompt",
                "Identical",
                "First\ndifference",
                "Accepted",
                "Plain\ntok/s",
                f"{method_label(report['settings'])}\ntok/s",
                "Speed-up",
            ],
            rows,
        )

    def _meta_text(self, report: Report) -> str:
        model = report["model"]
        versions = report["versions"]
        runtime = ", ".join(
            f"{name} {versions.get(name) or '–'}"
            for name in ("openvino", "openvino-genai", "optimum-intel", "transformers", "nncf")
        )
        mtp = model.get("mtp_precision") or "–"
        lm = model["precisions"].get("language_model") or "–"
        when = local_time(report["created"], "%Y-%m-%d %H:%M")
        if report["kind"] == "bench":
            settings = report["settings"]
            what = (
                f"{settings['runs']} run{'s' if settings['runs'] != 1 else ''} after "
                f"{settings['warmup']} warm-up, depths "
                f"{', '.join(map(str, settings['depths']))}, "
                f"{'exact f32' if report['numerics'] == 'exact' else 'default'} numerics"
            )
            what += f", peak memory {format_bytes(report['memory']['peak_rss_bytes'])}"
        else:
            what = f"{report['settings']['max_new_tokens']} new tokens, exact f32 numerics"
        return (
            f"{model['name']} on {report['device']} · {when} · {what}\n"
            f"Language model {lm} · MTP head {mtp} · source "
            f"{model['source_model_id'] or 'unknown'}\n{runtime}"
        )

    @staticmethod
    def _repolish(widget: QWidget) -> None:
        style = widget.style()
        style.unpolish(widget)
        style.polish(widget)

    def chart_image(self, caption: str) -> QImage:
        """Both charts side by side under `caption` (and the per-workload chart below), as
        "Charts (PNG)…" saves them."""
        width, height, gap, caption_h = 560, 300, 16, 28
        left = self.throughput_chart.render_image(QSize(width, height))
        right = self.acceptance_chart.render_image(QSize(int(width * 0.75), height))
        ratio = left.devicePixelRatio()
        image = QImage(
            left.width() + right.width() + round(gap * ratio),
            max(left.height(), right.height()) + round(caption_h * ratio),
            QImage.Format.Format_ARGB32,
        )
        image.setDevicePixelRatio(ratio)
        image.fill(self.palette().base().color())
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(self.palette().text().color())
        painter.drawText(
            QRectF(8, 4, image.width() / ratio - 16, caption_h - 4),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            caption,
        )
        painter.drawImage(0, caption_h, left)
        painter.drawImage(round(left.width() / ratio) + gap, caption_h, right)
        painter.end()
        if not self.workload_chart.has_data():
            return image
        # The methods-per-workload comparison goes underneath, full width.
        below = self.workload_chart.render_image(QSize(round(image.width() / ratio), height), ratio)
        combined = QImage(image.width(), image.height() + below.height(), image.format())
        combined.setDevicePixelRatio(ratio)
        combined.fill(self.palette().base().color())
        painter = QPainter(combined)
        painter.drawImage(0, 0, image)
        painter.drawImage(0, round(image.height() / ratio), below)
        painter.end()
        return combined
