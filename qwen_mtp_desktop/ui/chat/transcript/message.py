"""One chat message: role, optional image, collapsible thinking, Markdown/code segments, stats
and actions. Assistant messages stream: only the open tail changes per chunk."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QPixmap,
    QResizeEvent,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.continuation import continued_note
from qwen_mtp_desktop.core.chat.markdown import (
    Segment,
    StreamingSegmenter,
    first_page,
    split_segments,
)
from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.chat.store.stats import stats_method, stopped_before_first_token
from qwen_mtp_desktop.core.engine import StepChunk
from qwen_mtp_desktop.core.prompt.context_limit import left_out_note
from qwen_mtp_desktop.core.units import NBSP, count, duration, join_figures, keep_units, ttft_text
from qwen_mtp_desktop.ui.chat.transcript.draft_marks import DraftMarks
from qwen_mtp_desktop.ui.chat.transcript.markdown_view import PARAGRAPH_GAP
from qwen_mtp_desktop.ui.chat.transcript.message_controls import (
    AnswerProblem,
    InlineEditor,
    VersionSwitcher,
)
from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock, FoldedText
from qwen_mtp_desktop.ui.chat.transcript.tool_calls_view import show_stored_calls
from qwen_mtp_desktop.ui.figures import stats_tooltip

#: Characters rendered at once (issue 19): any answer costs at most this much until the user
#: asks for more, and a streaming answer keeps at most this much rendered above its tail.
PAGE_CHARS = 32_000
#: Code blocks per page that get their own widget (Copy button, highlighting); the rest are
#: monospace text in the page's document, so 5,000 fences do not make 5,000 widgets.
MAX_CODE_WIDGETS = 24
#: Below this width the stats line shortens its reused-tokens figure.
COMPACT_STATS_WIDTH = 620
DRAFT_TINT_LIGHT = QColor(120, 200, 140, 90)
DRAFT_TINT_DARK = QColor(60, 160, 90, 110)


def reused_text(stats: dict[str, Any], *, compact: bool = False) -> str:
    """ "6,712 of 6,790 prompt tokens reused" (compact: "6,712/6,790 reused"), "434 prompt
    tokens" when nothing was reused, "" for rows from before the figure."""
    reused, prompt = stats.get("reused_tokens"), stats.get("prompt_tokens")
    if not isinstance(reused, int) or not isinstance(prompt, int) or prompt <= 0:
        return ""
    if reused <= 0:
        return f"{prompt:,} prompt tokens"
    # "6,712 of 6,790" and "6,712/6,790 reused" stay whole when a line wraps.
    if compact:
        return f"{reused:,}/{prompt:,}{NBSP}reused"
    return f"{reused:,}{NBSP}of{NBSP}{prompt:,} prompt tokens reused"


def format_stats(stats: dict[str, Any], *, compact: bool = False) -> str:
    """The one-line summary shown under an answer (and live while it streams); `compact`
    shortens the reused-tokens figure where space is tight."""
    continued = continued_note(stats.get("continued"))  # the figures are then the new part's
    parts: list[str] = [continued]
    method = stats_method(stats)
    remote = stats.get("remote")
    if isinstance(remote, dict):
        # A remote server's answer: speed and TTFT were measured here; the method and
        # acceptance only when the server reported them (core.remote.client).
        endpoint = remote.get("endpoint")
        parts.append(f"remote · {endpoint[:120]}" if isinstance(endpoint, str) else "remote")
        if not isinstance(remote.get("server_stats"), dict):
            method = None
        if remote.get("tokens_reported") is False:
            stats = {k: v for k, v in stats.items() if k != "generated_tokens"}
    auto = stats.get("auto")
    named = ""  # what Auto's sentence already says, so the method is not named twice
    if isinstance(auto, dict) and isinstance(auto.get("summary"), str):
        # Older rows have no "auto" entry and read as before; rows with Auto's plain sentence
        # show it (its technical summary is in the tooltip, `auto_details`).
        sentence = auto.get("sentence")
        named = sentence if isinstance(sentence, str) else auto["summary"]
        parts.append(f"Auto · {named}")
        switched = auto.get("switched_to_plain_after_tokens")
        if isinstance(switched, int):
            parts.append(f"switched to plain after {count(switched, 'token')}")
    decoded = stats.get("generated_tokens") != 0  # else stopped while the prompt was read
    # Auto's sentence starts with the method in words ("Prompt lookup: ...", "Plain decoding:
    # ..."): the label is left out when it names the same method, whatever its case or details.
    head = named.partition(":")[0].strip().lower()
    same = bool(head) and method is not None and method.label.lower().startswith(head)
    label = "" if method is None or same else method.label
    if method is None:
        pass
    elif not decoded:
        parts.append(label)  # no drafts were made: no figures about them
    elif method.drafts_vary:
        parts.append(label)
        drafted, accepted = stats.get("drafted_tokens"), stats.get("accepted_tokens")
        if isinstance(drafted, int) and isinstance(accepted, int):
            # Prompt lookup proposes nothing where no n-gram matches: say how many it did.
            rate = f"{accepted / drafted:.0%} accepted" if drafted else "no match found"
            parts.append(f"{drafted} drafts, {rate}")
    elif not method.is_plain:
        # Turns the app's own decoder does not take (images) run on openvino-genai's MTP.
        via = " via openvino-genai" if stats.get("decoder") == "genai" else ""
        parts.append(f"{method.label}{via}" if via or label else "")
        share = stats.get("acceptance_rate")
        if share is not None:
            # At depth 1 a step keeps at most one guess, so per step repeats the share.
            per_step = stats.get("mean_accepted_per_step", 0)
            tail = f" ({per_step:.2f}/step)" if method.drafts > 1 else ""
            parts.append(f"{share:.0%} drafts accepted{tail}")
    else:
        parts.append(label)
    tps = stats.get("decode_tokens_per_s")
    if tps:
        parts.append(f"{tps:.1f} tok/s")
    reused = reused_text(stats, compact=compact)
    if reused:
        parts.append(reused)
    parts.append(left_out_note(stats.get("left_out_messages")))
    ttft = stats.get("ttft_s")
    if ttft is not None and decoded:
        parts.append(f"TTFT {ttft_text(ttft)}")
    tokens = stats.get("generated_tokens")
    if tokens is not None:
        parts.append(count(tokens, "more token" if continued else "token"))
    total = stats.get("total_s")
    if total:
        parts.append(duration(total))
    return join_figures([part for part in parts if part])


def stopped_notice(stats: dict[str, Any]) -> str:
    """What a stopped answer's notice says: a Stop while the prompt was still being read
    leaves no text at all, and one while the request waited (a model loading, another
    answer running) left the prompt unread (no prompt tokens)."""
    if stopped_before_first_token(stats):
        if not stats.get("prompt_tokens"):
            return "Stopped before the model began to read the prompt."
        return "Stopped while the prompt was being read, before the answer began."
    return "Stopped. The answer so far is kept."


class ThinkingBlock(FoldedText):
    """Qwen3.5's reasoning, folded away by default."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(("thinkingBlock", "thinkingToggle", "thinkingText"), "Thinking", parent)
        self.content = ""

    def append(self, delta: str) -> None:
        self.content += delta
        self.text.append_plain(delta)

    def set_text(self, text: str) -> None:
        self.content = text
        self.text.setPlainText(text)

    def set_summary(self, label: str) -> None:
        self.toggle.setText(label)


class MessageWidget(QFrame):
    """A message in the transcript.

    Signals:
        action(str): "copy", "edit", "continue", "regenerate" or "delete" was clicked.
        link_requested(QUrl): a link in the text was clicked.
        version_step(int): the user wants the previous (-1) or next (+1) version.
        edit_submitted(str): the inline edit was sent with this text.
    """

    action = Signal(str)
    link_requested = Signal(QUrl)
    version_step = Signal(int)
    edit_submitted = Signal(str)

    def __init__(
        self,
        role: str,
        *,
        dark: bool,
        content: str = "",
        reasoning: str = "",
        image: Path | None = None,
        stats: dict[str, Any] | None = None,
        status: str = "complete",
        error: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.role = role
        self.message_id: int | None = None
        #: The stored message this widget shows (None until stored, and while streaming).
        self.stored: StoredMessage | None = None
        self._dark = dark
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        # Streamed text is kept in pieces, joined on demand: appending stays O(chunk).
        self._parts: list[str] = []
        self._length = 0
        self.drafted_ranges: list[tuple[int, int]] = []
        self._segmenter: StreamingSegmenter | None = None
        #: Where the open segment streams: a widget of its own (a code block, or the drafts
        #: view), or the end of the current document from `_tail_start` on.
        self._tail_widget: AutoHeightText | CodeBlock | None = None
        self._tail_start: int | None = None
        self._show_drafts = False
        self._marks: DraftMarks | None = None  # drafted spans tinted (the Drafts toggle)
        # Rendering in pages, Markdown runs in one document (see PAGE_CHARS).
        self._run: AutoHeightText | None = None  # the document finished Markdown goes into
        self._code_widgets = 0
        self._unrendered: list[Segment] = []  # segments past the page shown
        self._plain_offset = 0  # for plain pages (user text, drafts view)
        self._pages_shown = 0  # pages rendered ("Show more" adds one); a theme change keeps them
        self._more_button: QPushButton | None = None
        self._stream_shown = 0  # characters of finished segments shown while streaming
        self._stream_hidden = 0
        self._stream_notice: QLabel | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(14, 10, 14, 8)
        outer.setSpacing(6)
        header = QHBoxLayout()
        header.setSpacing(6)
        self.role_label = QLabel("You" if role == "user" else "Assistant")
        self.role_label.setObjectName("roleLabel")
        header.addWidget(self.role_label)
        header.addStretch(1)
        self.versions = VersionSwitcher()
        self.versions.step.connect(self.version_step)
        header.addWidget(self.versions)
        self.editor: InlineEditor | None = None
        self._buttons: dict[str, QToolButton] = {}
        names = ["copy", "edit", "delete"]
        if role != "user":
            names = ["copy", "continue", "regenerate", "delete"]
        for name in names:
            button = QToolButton()
            button.setObjectName("messageAction")
            button.setText(name.capitalize())
            button.setAutoRaise(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, n=name: self.action.emit(n))
            header.addWidget(button)
            self._buttons[name] = button
        if "continue" in self._buttons:  # offered on an answer that ended early (the panel)
            self._buttons["continue"].setToolTip("Continue this answer where it ended")
            self._buttons["continue"].setVisible(False)
        outer.addLayout(header)

        if image is not None:
            thumb = QLabel()
            pixmap = QPixmap(str(image))
            if not pixmap.isNull():
                thumb.setPixmap(
                    pixmap.scaled(
                        160,
                        160,
                        Qt.AspectRatioMode.KeepAspectRatio,
                        Qt.TransformationMode.SmoothTransformation,
                    )
                )
            else:
                thumb.setText(f"[image not found: {image.name}]")
            thumb.setObjectName("imageThumb")
            outer.addWidget(thumb)

        self.thinking = ThinkingBlock()
        self.thinking.setVisible(False)
        outer.addWidget(self.thinking)
        # The text lives in a host widget so an inline edit can take its place.
        self._body_host = QWidget()
        self._body = QVBoxLayout(self._body_host)
        self._body.setContentsMargins(0, 0, 0, 0)
        self._body.setSpacing(6)
        outer.addWidget(self._body_host)
        self._outer = outer
        # An error (red-edged, with Retry and Open log) or a notice ("Stopped. ...").
        self.problem = AnswerProblem()
        self.problem.retry.connect(lambda: self.action.emit("regenerate"))
        self.problem.open_log.connect(lambda: self.action.emit("open-log"))
        self.error_label = self.problem.label
        outer.addWidget(self.problem)
        self.stats_label = QLabel()
        self.stats_label.setObjectName("statsLabel")
        self.stats_label.setWordWrap(True)
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stats_label.setVisible(False)
        self._stats: dict[str, Any] | None = None
        self._chat_model = ""  # the chat's model now: an answer by another one names its own
        outer.addWidget(self.stats_label)

        if reasoning:
            self.thinking.set_text(reasoning)
            self.thinking.setVisible(True)
        if content:
            self.set_content(content)
        if stats:
            self.set_stats(stats)
        if status == "incomplete":
            self.show_notice("This answer was interrupted and is incomplete.")
        elif stats and stats.get("finish_reason") == "cancelled":
            self.show_notice(stopped_notice(stats))
        elif status == "error" and error:
            self.show_error(error)

    # --- full content -------------------------------------------------------------------

    @property
    def content(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def set_content(self, text: str) -> None:
        self._clear_body()
        self._parts = [text] if text else []
        self._length = len(text)
        self._plain_offset = 0
        self._unrendered = []
        self._pages_shown = 0
        self._marks = None
        if self.role == "user":
            self._render_plain_page()
            return
        if self._show_drafts:
            self._marks = self._new_marks()
            self._marks.feed(text)
        self._unrendered = split_segments(text)
        self._render_page()

    def show_more(self) -> None:
        """Render the next page of a long message (the "Show more" button)."""
        if self._unrendered:
            self._render_page()
        else:
            self._render_plain_page()

    def _render_page(self) -> None:
        self._pages_shown += 1
        page, self._unrendered = first_page(self._unrendered, PAGE_CHARS)
        for segment in page:
            widget = self._add_segment(segment)
            if isinstance(widget, CodeBlock):
                self._finish_block(widget)
        self._update_more_button(sum(len(s.text) for s in self._unrendered))

    def _render_plain_page(self) -> None:
        self._pages_shown += 1
        text = self.content
        start, end = self._plain_offset, min(self._plain_offset + PAGE_CHARS, len(text))
        view = self._run or self._new_text()
        self._run = view
        view.append_plain(text[start:end])
        self._plain_offset = end
        self._update_more_button(len(text) - end)

    def _update_more_button(self, remaining: int) -> None:
        if self._more_button is not None:
            self._body.removeWidget(self._more_button)
            self._more_button.deleteLater()
            self._more_button = None
        if remaining > 0:
            button = QPushButton(f"Show more ({remaining:,} more characters)")
            button.setObjectName("showMoreButton")
            button.clicked.connect(self.show_more)
            self._body.addWidget(button)
            self._more_button = button

    def set_show_drafts(self, show: bool) -> None:
        """Tint the text that came from accepted drafts inside the rendered answer (or stop).
        A streaming answer starts tinting if nothing has arrived yet, else when it ends."""
        if show == self._show_drafts:
            return
        self._show_drafts = show
        if self._segmenter is None:
            if self.role == "assistant":
                self.set_content(self.content)
        elif not show:
            self._marks = None
        elif self._length == 0:
            self._marks = self._new_marks()

    def set_dark(self, dark: bool) -> None:
        """Follow a theme change: a finished message is rendered again (links and code take
        the new colours; the pages shown stay shown), a streaming one restyles its code."""
        if dark == self._dark:
            return
        self._dark = dark
        if self._segmenter is not None or self.editing:
            for block in self._body_host.findChildren(CodeBlock):
                block.set_dark(dark)
            return
        pages = self._pages_shown
        self.set_content(self.content)
        for _ in range(pages - 1):
            if self._more_button is None:
                break
            self.show_more()

    def add_section(self, section: QWidget) -> None:
        """A part of the answer shown above its text (its tool calls)."""
        self._outer.insertWidget(self._outer.indexOf(self._body_host), section)

    def keep_actions(self, *names: str) -> None:
        """Show only these action buttons (e.g. "copy" where a message is not in a chat)."""
        for name, button in self._buttons.items():
            button.setVisible(name in names)

    # --- streaming ------------------------------------------------------------------------

    def begin_stream(self) -> None:
        self._clear_body()
        self._parts = []
        self._length = 0
        self.drafted_ranges = []
        self._marks = self._new_marks() if self._show_drafts else None
        self._segmenter = StreamingSegmenter()
        self._tail_widget = None
        self._tail_start = None
        self._stream_shown = self._stream_hidden = 0
        for name in ("continue", "regenerate", "edit"):
            if name in self._buttons:
                self._buttons[name].setEnabled(False)

    def resume_stream(self) -> None:
        """Stream on after the text shown (Continue): it stays, its drafted spans with it;
        the notice and the figures of the answer as it ended go."""
        text, drafted = self.content, list(self.drafted_ranges)
        self.problem.setVisible(False)
        self.stats_label.setVisible(False)
        self.begin_stream()
        self.append(text, "", drafted)

    def set_continuable(self, offered: bool) -> None:
        """Show Continue (an answer that ended early, the chat's last) or hide it."""
        if "continue" in self._buttons:
            self._buttons["continue"].setVisible(offered)

    def append_chunks(self, chunks: Sequence[StepChunk]) -> tuple[str, str]:
        """Add a batch of streamed chunks in one update (its cost is per call), their drafted
        characters marked; returns the (answer, reasoning) text added."""
        answer: list[str] = []
        drafted: list[tuple[int, int]] = []
        offset = 0
        for chunk in chunks:
            if chunk.drafted_answer_chars:
                drafted.append((offset, offset + chunk.drafted_answer_chars))
            answer.append(chunk.answer)
            offset += len(chunk.answer)
        answer_text, reasoning_text = "".join(answer), "".join(c.reasoning for c in chunks)
        self.append(answer_text, reasoning_text, drafted)
        return answer_text, reasoning_text

    def append(
        self, answer: str, reasoning: str = "", drafted: int | Sequence[tuple[int, int]] = 0
    ) -> None:
        """Add streamed text. `drafted` says which characters of `answer` came from accepted
        MTP drafts: a count from its start, or (start, end) ranges within it."""
        if reasoning:
            if not self.thinking.isVisible():
                self.thinking.setVisible(True)
            self.thinking.append(reasoning)
        if not answer:
            return
        start = self._length
        ranges = [(0, drafted)] if isinstance(drafted, int) else list(drafted)
        for low, high in ranges:
            if high <= low:
                continue
            if self.drafted_ranges and self.drafted_ranges[-1][1] == start + low:
                self.drafted_ranges[-1] = (self.drafted_ranges[-1][0], start + high)
            else:
                self.drafted_ranges.append((start + low, start + high))
        self._parts.append(answer)
        self._length += len(answer)
        if self._marks is not None:
            self._marks.feed(answer)
        segmenter = self._segmenter
        assert segmenter is not None
        was_code = segmenter.in_code
        finished = segmenter.feed(answer)
        if finished or segmenter.in_code != was_code or not self._tail_shown:
            # The open segment changed: render what completed (each segment once), then show
            # the new open segment (cost: these segments, not the answer so far).
            code_tail = self._take_tail()
            for segment in finished:
                if self._stream_shown + len(segment.text) > PAGE_CHARS:
                    code_tail = None  # _hide_streamed deletes it with the rest
                    self._hide_streamed()
                if code_tail is not None and segment.kind == "code":
                    # The block that streamed becomes the finished one: no new widget.
                    code_tail.set_code(segment.text)
                    self._finish_block(code_tail)
                    self._code_widgets += 1
                else:
                    widget = self._add_segment(segment)
                    if isinstance(widget, CodeBlock):
                        self._finish_block(widget)
                code_tail = None
                self._stream_shown += len(segment.text)
            if code_tail is not None:
                self._remove_widget(code_tail)
            tail = segmenter.tail  # joins the open segment: only when it changed
            if tail is not None:
                self._show_tail(tail, segmenter.tail_text)
            return
        # The open segment grew by exactly this text: append it (cost: this chunk only).
        self._append_to_tail(answer)

    @property
    def _tail_shown(self) -> bool:
        return self._tail_widget is not None or self._tail_start is not None

    def _show_tail(self, tail: Segment, text: str) -> None:
        """Show the open segment: a code block streams into its own widget (while a page has
        room for one), everything else as plain text at the end of the current document, so a
        stream of short blocks makes no widget per block (issue 29)."""
        if tail.kind == "code" and self._code_widgets < MAX_CODE_WIDGETS:
            block = CodeBlock(tail.language, self._dark)
            self._body.addWidget(block)
            self._tail_widget = block
            self._run = None  # Markdown after the block goes into a new document below it
            block.append(text)
            return
        view = self._run or self._new_text()
        self._run = view
        document = view.document()
        cursor = QTextCursor(document)
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._tail_start = cursor.position()
        if not document.isEmpty():  # a plain block of its own, whatever the last one is,
            spaced = QTextBlockFormat()  # spaced as the rendered paragraph will be
            spaced.setTopMargin(PARAGRAPH_GAP)
            cursor.insertBlock(spaced, QTextCharFormat())
        self._append_streamed(view, text)

    def _take_tail(self) -> CodeBlock | None:
        """Remove the open segment's text from the document it streams into (the document is
        as it was before); a code block widget it streamed into is returned, to be reused."""
        if self._tail_start is not None and self._run is not None:
            cursor = QTextCursor(self._run.document())
            cursor.setPosition(self._tail_start)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
        self._tail_start = None
        widget, self._tail_widget = self._tail_widget, None
        if isinstance(widget, CodeBlock):
            return widget
        if widget is not None:
            self._remove_widget(widget)
        return None

    def _remove_widget(self, widget: QWidget) -> None:
        self._body.removeWidget(widget)
        widget.deleteLater()

    def _append_to_tail(self, text: str) -> None:
        if isinstance(self._tail_widget, CodeBlock):
            self._tail_widget.append(text)
        elif self._tail_widget is not None:
            self._append_streamed(self._tail_widget, text)
        elif self._tail_start is not None and self._run is not None:
            self._append_streamed(self._run, text)

    def _append_streamed(self, view: AutoHeightText, text: str) -> None:
        """Append the end of the answer so far as plain text (the open segment), its drafted
        parts tinted while Drafts is on (cost: the ranges within this text)."""
        if self._marks is None:
            view.append_plain(text)
            return
        tint = DRAFT_TINT_DARK if self._dark else DRAFT_TINT_LIGHT
        offset = self._length - len(text)
        ranges = self.drafted_ranges
        index = max(bisect.bisect_right(ranges, (offset, offset)) - 1, 0)
        position = 0
        while index < len(ranges) and ranges[index][0] - offset < len(text):
            low, high = max(ranges[index][0] - offset, 0), min(ranges[index][1] - offset, len(text))
            index += 1
            if high <= position:
                continue
            if low > position:
                view.append_plain(text[position:low])
            view.append_plain(text[max(low, position) : high], tint)
            position = high
        if position < len(text):
            view.append_plain(text[position:])

    def _hide_streamed(self) -> None:
        """Drop the rendered part of a streaming answer that grew past a page: the live view
        keeps a bounded amount of text (it is all shown, in pages, when the answer ends)."""
        self._stream_hidden += self._stream_shown
        self._stream_shown = 0
        self._clear_body()
        # Later pages of a live answer show code as monospace text: a widget per block there
        # would be thrown away at the end (the answer is rendered again, in pages, when it
        # ends), and 5,000 fences would make thousands (issue 29).
        self._code_widgets = MAX_CODE_WIDGETS
        notice = QLabel(
            f"{self._stream_hidden:,} characters above are shown when the answer is complete."
        )
        notice.setObjectName("streamNotice")
        self._body.addWidget(notice)
        self._stream_notice = notice

    def end_stream(self) -> None:
        """Render the finished answer once, properly, as a whole."""
        self._segmenter = None
        self._stream_shown = self._stream_hidden = 0
        self._tail_widget = None
        self._tail_start = None
        self.set_content(self.content)
        for button in self._buttons.values():
            button.setEnabled(True)

    # --- footer -----------------------------------------------------------------------------

    def set_stats(self, stats: dict[str, Any]) -> None:
        self._stats = stats
        show_stored_calls(self, stats)  # the answer's MCP tool calls, folded
        self._show_stats()
        self.stats_label.setVisible(True)
        remote = stats.get("remote")
        notice = remote.get("notice") if isinstance(remote, dict) else None
        if isinstance(notice, str) and notice and self.problem.isHidden():
            # The server's word on what it read (serve with the demo model: the last
            # message only), as the local chat's banner says it for the demo model.
            self.show_notice(notice[:600])
        reasoning = stats.get("reasoning_tokens")
        if reasoning and self.thinking.isVisible():
            self.thinking.set_summary(f"Thinking ({count(reasoning, 'token')})")
        ranges = stats.get("drafted_ranges")
        if isinstance(ranges, list):
            self.drafted_ranges = [(int(a), int(b)) for a, b in ranges]

    def _show_stats(self) -> None:
        """The stats line, compact where the message is narrow (the tooltip explains)."""
        if self._stats is None:
            return
        compact = 0 < self.width() < COMPACT_STATS_WIDTH
        text = format_stats(self._stats, compact=compact)
        writer = self.written_by()
        if writer:  # the chat's model changed since: say which one wrote this answer
            text = f"{writer}  ·  {text}" if text else writer  # as join_figures separates
        self.stats_label.setText(keep_units(text))
        tooltip = stats_tooltip(format_stats(self._stats))
        model = self._stats.get("model")
        if isinstance(model, str) and model:
            tooltip += f"<p>Written by {escape(model)}</p>"
        auto = self._stats.get("auto")
        if isinstance(auto, dict) and isinstance(auto.get("sentence"), str):
            tooltip += f"<p><b>Auto's reason</b>: {escape(str(auto.get('summary', '')))}</p>"
        self.stats_label.setToolTip(tooltip)

    def set_chat_model(self, model_dir: str) -> None:
        """The chat's model now (an answer written by another one names its model)."""
        if model_dir != self._chat_model:
            self._chat_model = model_dir
            self._show_stats()

    def written_by(self) -> str:
        """The name of the model that wrote this answer when it is not the chat's model now
        (kept in the answer's stats, so it survives a restart); "" otherwise."""
        stats = self._stats or {}
        name, folder = stats.get("model"), stats.get("model_dir")
        if not (isinstance(name, str) and name and isinstance(folder, str) and folder):
            return ""
        return name if self._chat_model and folder != self._chat_model else ""

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self._stats is not None and (event.oldSize().width() < COMPACT_STATS_WIDTH) != (
            event.size().width() < COMPACT_STATS_WIDTH
        ):
            self._show_stats()

    def show_error(self, message: str) -> None:
        self.problem.show_problem(message, "error", actions=self.role == "assistant")

    def show_notice(self, message: str) -> None:
        self.problem.show_problem(message, "notice", actions=False)

    def copy_text(self) -> None:
        QApplication.clipboard().setText(self.content)

    def set_version(self, version: int, count: int) -> None:
        self.versions.set_version(version, count)

    # --- inline edit ------------------------------------------------------------------------

    @property
    def editing(self) -> bool:
        return self.editor is not None

    def begin_edit(self) -> InlineEditor:
        """Turn the text into an editor in place (Enter sends, Esc cancels)."""
        if self.editor is None:
            editor = InlineEditor(self.content)
            editor.submitted.connect(self.edit_submitted)
            editor.cancelled.connect(self.end_edit)
            self._outer.insertWidget(self._outer.indexOf(self._body_host) + 1, editor)
            self._body_host.setVisible(False)
            for button in self._buttons.values():
                button.setVisible(False)
            self.editor = editor
        self.editor.focus()
        return self.editor

    def end_edit(self) -> None:
        editor, self.editor = self.editor, None
        if editor is None:
            return
        self._outer.removeWidget(editor)
        editor.deleteLater()
        self._body_host.setVisible(True)
        for button in self._buttons.values():
            button.setVisible(True)
        self._buttons["edit" if "edit" in self._buttons else "copy"].setFocus()

    # --- internals ------------------------------------------------------------------------

    def _new_text(self) -> AutoHeightText:
        view = AutoHeightText()
        view.link_requested.connect(self.link_requested)
        self._body.addWidget(view)
        return view

    def _add_segment(self, segment: Segment) -> AutoHeightText | CodeBlock:
        """Render a finished segment: Markdown goes on into the current document; a code
        block gets its own widget while a page has fewer than MAX_CODE_WIDGETS."""
        if segment.kind == "code" and self._code_widgets < MAX_CODE_WIDGETS:
            block = CodeBlock(segment.language, self._dark)
            if segment.text:
                block.set_code(segment.text)
            self._body.addWidget(block)
            self._code_widgets += 1
            self._run = None
            return block
        view = self._run
        if view is None:
            view = self._new_text()
            self._run = view
        document = view.document()
        start = document.characterCount() - 1
        if segment.kind == "code":
            label = start if document.isEmpty() else start + 1
            view.append_code(segment.text, segment.language)
            # The label line ("python") stands for no source text: mark from the code on.
            start = document.findBlock(label).next().position()
        elif segment.text:
            view.append_markdown(segment.text)
        if self._marks is not None:
            self._marks.mark(document, start, code=segment.kind == "code")
        return view

    def _finish_block(self, block: CodeBlock) -> None:
        block.finish()
        if self._marks is not None:
            self._marks.mark(block.view.document(), code=True)

    def _new_marks(self) -> DraftMarks:
        return DraftMarks(self.drafted_ranges, DRAFT_TINT_DARK if self._dark else DRAFT_TINT_LIGHT)

    def _clear_body(self) -> None:
        self._run = None
        self._tail_widget = None
        self._tail_start = None
        self._code_widgets = 0
        self._more_button = None
        self._stream_notice = None
        while self._body.count():
            item = self._body.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
