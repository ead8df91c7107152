"""Logging to a rotating file in the app's log dir (and to stderr for warnings).

Conversations are private: prompts and answers go to the log only through
`log_conversation`, at DEBUG level, which the app enables only when the user turns on debug
logging (Settings.debug_logging). Other log lines must never include message text.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
from pathlib import Path

from qwen_mtp_desktop.core.files.private_files import (
    PRIVATE_DIR_MODE,
    make_private,
    open_private_text,
)

_FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"
CONVERSATION_LOGGER = "qwen_mtp_desktop.conversation"
#: Set while debug logging is on, so the processes the app starts (the engine host) log the
#: same way; their log reaches the app's file through the app.
DEBUG_LOG_ENV = "QWEN_MTP_DESKTOP_DEBUG_LOG"
_conversation = logging.getLogger(CONVERSATION_LOGGER)


def log_conversation(kind: str, text: str) -> None:
    """Log a prompt or an answer, only when debug logging is on (never by default)."""
    if _conversation.isEnabledFor(logging.DEBUG):
        _conversation.debug("%s (%d chars): %s", kind, len(text), text)


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Creates each log file owner-only (0600 on POSIX); rotation renames keep the mode."""

    def _open(self) -> io.TextIOWrapper:
        return open_private_text(Path(self.baseFilename), "a", self.encoding or "utf-8")


def setup_logging(
    log_file: Path, *, debug: bool = False, stderr_level: int = logging.WARNING
) -> None:
    """Configure the root logger once; calling again replaces the app's handlers."""
    log_file.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    for old in (log_file, *log_file.parent.glob(log_file.name + ".*")):
        make_private(old)  # rotated logs an older version left readable by others
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_qwen_mtp_desktop", False):
            root.removeHandler(handler)
            handler.close()
    file_handler = _PrivateRotatingFileHandler(
        log_file, maxBytes=2_000_000, backupCount=5, encoding="utf-8"
    )
    file_handler.setFormatter(logging.Formatter(_FORMAT))
    stream_handler = logging.StreamHandler()
    stream_handler.setLevel(stderr_level)
    stream_handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    for handler in (file_handler, stream_handler):
        handler._qwen_mtp_desktop = True  # type: ignore[union-attr]  # marks our own handlers
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if debug:
        os.environ[DEBUG_LOG_ENV] = "1"
    else:
        os.environ.pop(DEBUG_LOG_ENV, None)
