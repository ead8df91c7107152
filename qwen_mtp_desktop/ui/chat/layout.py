"""The chat panel's layout: its widgets and where they sit, the two side columns (chats,
settings) sharing the width with the conversation, and the Tab order. What the widgets do is
`ChatPanel`'s (ui.chat.panel), which builds on this class."""

from __future__ import annotations

import itertools

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QHBoxLayout,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.chat.banners import DemoBanner, HealthBanner, UndoBar
from qwen_mtp_desktop.ui.chat.composer.composer import Composer
from qwen_mtp_desktop.ui.chat.composer.examples import ExamplePrompts
from qwen_mtp_desktop.ui.chat.conversations.list import ConversationList
from qwen_mtp_desktop.ui.chat.header import ChatHeader
from qwen_mtp_desktop.ui.chat.options.panel import ChatSettingsPanel
from qwen_mtp_desktop.ui.chat.transcript.view import Transcript
from qwen_mtp_desktop.ui.chat.turns.live_figures import LiveFigures

#: The conversation keeps at least this width; below it a side column closes.
MIN_CONVERSATION_WIDTH = 560


class ChatLayout(QWidget):
    """Chats list | header, banners, transcript, examples, figures, undo bar, composer |
    settings."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.figures = LiveFigures(self)
        self.conversations = ConversationList()

        center = QWidget()
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(0, 0, 0, 0)
        center_layout.setSpacing(0)

        self.header = ChatHeader()
        # The header's parts by name: the rest of the app and the tests reach them so.
        self.title_label = self.header.title_label
        self.model_status = self.header.model_status
        self.busy_bar = self.header.busy_bar
        self.drafts_toggle = self.header.drafts_toggle
        self.settings_toggle = self.header.settings_toggle
        self.chats_toggle = self.header.chats_toggle
        self.model_picker = self.header.model_picker
        self.compare_button = QToolButton()
        self.compare_button.setText("Compare with plain")

        self.banner_wrap = DemoBanner()
        self.demo_banner = self.banner_wrap.frame
        self.demo_turn_note = self.banner_wrap.turn_note
        self.health_wrap = HealthBanner()
        self.health_banner = self.health_wrap.frame
        self.health_text = self.health_wrap.text
        self.revalidate_button = self.health_wrap.revalidate_button

        self.transcript = Transcript()
        self.live_stats = self.figures.label
        self.legend = self.figures.legend
        self.undo_bar = UndoBar()
        self.delete_notice = self.undo_bar
        self.composer = Composer()

        center_layout.addWidget(self.header)
        center_layout.addWidget(self.banner_wrap)
        center_layout.addWidget(self.health_wrap)
        center_layout.addWidget(self.transcript, 1)
        self.examples = ExamplePrompts()
        # A chip sends its prompt and hides: the next message is typed, so focus goes there.
        self.examples.chosen.connect(lambda _text: self.composer.editor.setFocus())
        center_layout.addWidget(self.examples)
        # The figures, and beside them Compare: the same message plain and with MTP.
        figures_row = QHBoxLayout()
        figures_row.setContentsMargins(0, 0, 20, 0)
        figures_row.addWidget(self.live_stats, 1)
        figures_row.addWidget(self.compare_button, 0, Qt.AlignmentFlag.AlignBottom)
        center_layout.addLayout(figures_row)
        center_layout.addWidget(self.legend)
        center_layout.addWidget(self.undo_bar)
        center_layout.addWidget(self.composer)

        self.settings_panel = ChatSettingsPanel()
        #: The chat list was closed to make room for the options (not by the user).
        self._chats_made_room = False
        self.settings_toggle.toggled.connect(self._on_settings_toggled)
        self.chats_toggle.toggled.connect(self._on_chats_toggled)
        self.settings_panel.setVisible(False)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.conversations)
        layout.addWidget(center, 1)
        layout.addWidget(self.settings_panel)

    # The two side columns share the width with the conversation: when both do not fit next
    # to a readable conversation, opening one closes the other.

    def _narrow(self) -> bool:
        sides = self.conversations.width() + self.settings_panel.width()
        return self.width() - sides < MIN_CONVERSATION_WIDTH

    def _on_settings_toggled(self, show: bool) -> None:
        if show and self.conversations.isVisibleTo(self) and self._narrow():
            self.chats_toggle.setChecked(False)
            self._chats_made_room = True  # closing the options brings the list back
        self.settings_panel.setVisible(show)
        if not show and self._chats_made_room:
            self._chats_made_room = False
            self.chats_toggle.setChecked(True)

    def _on_chats_toggled(self, show: bool) -> None:
        self._chats_made_room = False  # the user chose: leave the list as it is
        if show and self.settings_panel.isVisibleTo(self) and self._narrow():
            self.settings_toggle.setChecked(False)
        self.conversations.setVisible(show)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        both = self.conversations.isVisibleTo(self) and self.settings_panel.isVisibleTo(self)
        if both and self._narrow():
            self.chats_toggle.setChecked(False)

    def _update_tab_order(self) -> None:
        """Tab goes through the panel as it reads: chats, header, banners, each message (its
        version arrows and actions), examples, Compare, the undo bar, the composer, settings.
        Qt appends widgets made later (messages) to the end of the chain, so it is redone
        whenever the transcript changes."""
        chain: list[QWidget] = []
        sections: list[QWidget] = [
            self.conversations,
            self.header,
            self.banner_wrap,
            self.health_wrap,
            self.transcript,  # focused, the arrow and page keys scroll the conversation
            self.transcript.earlier_button,
            *self.transcript.messages,
            self.examples,
            self.compare_button,
            self.undo_bar,
            self.composer,
            self.settings_panel,
        ]
        for section in sections:
            # The transcript itself, once: its messages are their own sections.
            chain.extend([section] if section is self.transcript else _focusable(section))
        for first, second in itertools.pairwise(chain):
            QWidget.setTabOrder(first, second)


def _focusable(root: QWidget) -> list[QWidget]:
    """`root` and its descendants that Tab can reach, in the order they were laid out.
    Compound widgets (spin boxes, combo boxes, item views) count once: they own their parts."""
    found: list[QWidget] = []

    def walk(widget: QWidget) -> None:
        if widget.isWindow() and widget is not root:
            return  # a popup (a combo box's list) is not part of the chain
        if widget.focusPolicy() & Qt.FocusPolicy.TabFocus:
            found.append(widget)
        if isinstance(widget, QAbstractSpinBox | QComboBox | QAbstractItemView):
            return
        # Widgets only: children() would also wrap every layout, document and action, and
        # PySide builds each new wrapper type's enums on first sight (0.1-0.3 s at start-up).
        for child in widget.findChildren(
            QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly
        ):
            walk(child)

    walk(root)
    return found
