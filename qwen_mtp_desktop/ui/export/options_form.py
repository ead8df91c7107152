"""The export wizard's options: main weight format, its compression settings, the MTP head's.

Each format's settings sit directly under that format, and only the settings that apply to
the current choice are shown (issue 18: the INT4 settings used to sit under FP16). When only
the MTP head is INT4 (main model INT8 or FP16), the INT4 settings appear under the main format
with a caption saying they are for the MTP head.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QRadioButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.export.options import (
    ExportOptions,
    GroupSizeFallback,
    MtpWeightFormat,
    WeightFormat,
)
from qwen_mtp_desktop.ui.export.widgets import (
    FALLBACK_LABELS,
    FALLBACK_TEXT,
    MTP_FORMAT_TEXT,
    MTP_TRADE_OFF,
    WEIGHT_FORMAT_TEXT,
)
from qwen_mtp_desktop.ui.widgets.labels import text_label

GROUP_SIZES = (("128", 128), ("64", 64), ("32", 32), ("16", 16), ("per channel", -1))
MTP_LABELS: tuple[tuple[MtpWeightFormat, str], ...] = (
    ("default", "Recommended"),
    ("same", "Same as the main model"),
    ("none", "No compression (FP16)"),
    ("int8", "INT8"),
    ("int4", "INT4"),
)
FORMATS: tuple[WeightFormat, ...] = ("int4", "int8", "fp16")


class ExportOptionsForm(QWidget):
    """Weight format radios with their settings, and the MTP head's compression.

    Signals:
        changed(): any option changed.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        layout = self._layout
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(text_label("Main model weights", "pageTitle"))
        self.format_group = QButtonGroup(self)
        self.format_radios: dict[str, QRadioButton] = {}
        #: The hint under each format; the settings box goes right after it.
        self._hints: dict[str, QLabel] = {}
        for fmt in FORMATS:
            radio = QRadioButton(fmt.upper())
            self.format_group.addButton(radio)
            self.format_radios[fmt] = radio
            layout.addWidget(radio)
            hint = text_label(WEIGHT_FORMAT_TEXT[fmt], "hint")
            hint.setContentsMargins(24, 0, 0, 2)
            layout.addWidget(hint)
            self._hints[fmt] = hint
        self.format_radios["int4"].setChecked(True)

        self.int4_box = QWidget()
        box_layout = QVBoxLayout(self.int4_box)
        box_layout.setContentsMargins(24, 4, 0, 4)
        box_layout.setSpacing(4)
        self.settings_caption = text_label("", "hint")
        box_layout.addWidget(self.settings_caption)
        self._form = QFormLayout()
        form = self._form
        form.setContentsMargins(0, 0, 0, 0)
        form.setHorizontalSpacing(12)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.group_combo = QComboBox()
        for text, size in GROUP_SIZES:
            self.group_combo.addItem(text, size)
        # A size the user picked stays; until then it follows the checkpoint (fit_group_size).
        self._group_picked = False
        self.group_combo.activated.connect(lambda _i: setattr(self, "_group_picked", True))
        self.sym_check = QCheckBox("Symmetric (no zero points; slightly smaller, less exact)")
        self.ratio_spin = QDoubleSpinBox()
        self.ratio_spin.setRange(0.1, 1.0)
        self.ratio_spin.setSingleStep(0.1)
        self.ratio_spin.setDecimals(2)
        self.ratio_spin.setValue(1.0)
        self.ratio_spin.setToolTip("Share of layers in INT4; the rest stay INT8 (more accurate)")
        self.fallback_combo = QComboBox()
        for fallback in ("ignore", "adjust", "error"):
            self.fallback_combo.addItem(FALLBACK_LABELS[fallback], fallback)
        self.fallback_text = text_label("", "hint")
        self.fallback_text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        form.addRow("Group size", self.group_combo)
        form.addRow("INT4 share", self.ratio_spin)
        form.addRow("Group fallback", self.fallback_combo)
        form.addRow("", self.fallback_text)
        form.addRow("", self.sym_check)
        box_layout.addLayout(form)
        # What these settings mean for the checkpoint (the wizard fills it: INT4 group size).
        self.problems_label = text_label("", "optionsProblems")
        self.problems_label.hide()
        box_layout.addWidget(self.problems_label)
        layout.addWidget(self.int4_box)

        layout.addSpacing(6)
        layout.addWidget(text_label("MTP head compression", "pageTitle"))
        self.mtp_combo = QComboBox()
        for mtp_value, mtp_text in MTP_LABELS:
            self.mtp_combo.addItem(mtp_text, mtp_value)
        mtp_row = QHBoxLayout()
        mtp_row.addWidget(self.mtp_combo)
        mtp_row.addStretch(1)
        layout.addLayout(mtp_row)
        self.mtp_text = text_label("")
        layout.addWidget(self.mtp_text)
        layout.addWidget(text_label(MTP_TRADE_OFF, "hint"))

        self.format_group.buttonToggled.connect(lambda *_args: self._on_changed())
        for combo in (self.group_combo, self.fallback_combo, self.mtp_combo):
            combo.currentIndexChanged.connect(lambda _i: self._on_changed())
        self.ratio_spin.valueChanged.connect(lambda _v: self._on_changed())
        self.sym_check.toggled.connect(lambda _v: self._on_changed())
        self._place_settings()

    def weight_format(self) -> WeightFormat:
        for name in FORMATS:
            if self.format_radios[name].isChecked():
                return name
        return "int4"

    def set_weight_format(self, fmt: str) -> bool:
        radio = self.format_radios.get(fmt)
        if radio is None:
            return False
        radio.setChecked(True)
        return True

    def fit_group_size(self, size: int | None) -> None:
        """Default the INT4 group size to `size`, the largest that fits the checkpoint's layers
        (core.models.export.preflight.checks.fitting_group_size), unless the user picked one;
        None (sizes unknown): optimum-intel's 128."""
        index = self.group_combo.findData(size if size is not None else GROUP_SIZES[0][1])
        if not self._group_picked and index >= 0:
            self.group_combo.setCurrentIndex(index)

    def options(self, *, trust_remote_code: bool) -> ExportOptions:
        fmt = self.weight_format()
        mtp: MtpWeightFormat = self.mtp_combo.currentData()
        int4 = fmt == "int4" or mtp == "int4"
        compressed = fmt in ("int4", "int8") or mtp in ("int4", "int8")
        group = self.group_combo.currentData()
        fallback: GroupSizeFallback = self.fallback_combo.currentData()
        return ExportOptions(
            weight_format=fmt,
            group_size=int(group) if int4 and group != 128 else None,
            sym=self.sym_check.isChecked() and compressed,
            ratio=self.ratio_spin.value()
            if fmt == "int4" and self.ratio_spin.value() < 1
            else None,
            group_size_fallback=fallback if int4 else None,
            trust_remote_code=trust_remote_code,
            mtp_weight_format=mtp,
        )

    def _on_changed(self) -> None:
        self._place_settings()
        self.changed.emit()

    def _place_settings(self) -> None:
        """Put the settings box under the chosen format, showing only the rows that apply."""
        fmt = self.weight_format()
        mtp = self.mtp_combo.currentData()
        int4 = fmt == "int4" or mtp == "int4"
        compressed = fmt in ("int4", "int8") or mtp in ("int4", "int8")
        layout = self._layout
        index = layout.indexOf(self._hints[fmt]) + 1
        if layout.indexOf(self.int4_box) != index:
            layout.removeWidget(self.int4_box)
            layout.insertWidget(layout.indexOf(self._hints[fmt]) + 1, self.int4_box)
        self._form.setRowVisible(self.group_combo, int4)
        self._form.setRowVisible(self.ratio_spin, fmt == "int4")
        self._form.setRowVisible(self.fallback_combo, int4)
        self._form.setRowVisible(self.fallback_text, int4)
        self._form.setRowVisible(self.sym_check, compressed)
        self.ratio_spin.setEnabled(fmt == "int4")
        if fmt == "int4":
            caption = "INT4 settings" + (" (also used for the MTP head)" if mtp == "int4" else "")
        elif fmt == "int8" and mtp == "int4":
            caption = "INT8 setting; group size and fallback are for the INT4 MTP head"
        elif mtp == "int4":
            caption = "INT4 settings for the MTP head (the main model stays FP16)"
        elif fmt == "int8":
            caption = "INT8 setting"
        else:
            caption = "Settings for the compressed MTP head"
        self.settings_caption.setText(caption)
        self.int4_box.setVisible(compressed)
        self.int4_box.setEnabled(compressed)
        self.mtp_text.setText(MTP_FORMAT_TEXT[mtp])
        self.fallback_text.setText(FALLBACK_TEXT[self.fallback_combo.currentData()])
