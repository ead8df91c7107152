"""A conversation as a file to keep or share: JSON (everything, with the stats of every
answer) or Markdown (readable, reasoning folded away, one stats line per answer). An answer's
tool calls (its stats record's "tool_calls", read by core.chat.tools) are in both: in JSON
as the message's `tool_calls` (rounds: the text before the calls, then each call's function,
server, tool, arguments, status, result, start and duration), in Markdown as one folded block
per call (its one-line summary as the transcript shows it, the arguments and the result).

A file to share names the model, never where it lies on this computer: the absolute model
folder (the conversation's and each answer's) stays out of both formats."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from qwen_mtp_desktop.core.chat.store.records import Conversation, StoredMessage, stats_summary
from qwen_mtp_desktop.core.chat.tools import (
    ToolRound,
    call_summary,
    trace_from_record,
    trace_record,
)

EXPORT_FORMAT = "qwen-mtp-desktop.chat"
#: 2: "model" (the model's name) replaced "model_dir" (its absolute folder).
#: 3: a message's tool calls are its own `tool_calls`, no longer inside its `stats`.
EXPORT_VERSION = 3
#: Folders named after their format: the model's name is the folder above (as `serve` does).
_FORMAT_FOLDERS = frozenset({"openvino", "ov", "ir", "model", "export", "exported", "output"})


def model_name(conv: Conversation, messages: Sequence[StoredMessage]) -> str:
    """The model's name as the chat showed it (the newest answer's stats keep it), else its
    folder's name; "" when the chat has no model."""
    for message in reversed(messages):
        name = message.stats.get("model") if message.stats else None
        if isinstance(name, str) and name:
            return name
    if not conv.model_dir:
        return ""
    folder = PurePath(conv.model_dir)
    if folder.name.lower() in _FORMAT_FOLDERS and folder.parent.name:
        return folder.parent.name
    return folder.name


def _shared_stats(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """An answer's stats without the model's absolute folder (and its tool calls, which the
    message carries)."""
    if stats is None:
        return None
    return {k: v for k, v in stats.items() if k not in ("model_dir", "tool_calls")}


def _tool_rounds(message: StoredMessage) -> list[ToolRound]:
    """An answer's rounds of tool calls, as the transcript shows them (damaged entries left
    out, a call stored while it waited shown cancelled)."""
    return trace_from_record(message.stats.get("tool_calls")) if message.stats else []


def chat_json(conv: Conversation, messages: Sequence[StoredMessage]) -> str:
    """The conversation, its settings and every message with its stats, as JSON text."""
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": time.time(),
        "conversation": {
            "id": conv.id,
            "title": conv.title,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "model": model_name(conv, messages),
            "system_prompt": conv.system_prompt,
            "settings": conv.settings.to_dict(),
        },
        "messages": [
            {
                "id": m.id,
                "position": m.position,
                "role": m.role,
                "content": m.content,
                "reasoning": m.reasoning,
                "image_path": str(m.image_path) if m.image_path is not None else None,
                "created_at": m.created_at,
                "status": m.status,
                "error": m.error,
                "tool_calls": trace_record(_tool_rounds(m)),
                "stats": _shared_stats(m.stats),
            }
            for m in messages
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def chat_markdown(conv: Conversation, messages: Sequence[StoredMessage]) -> str:
    """The conversation as Markdown."""
    s = conv.settings
    method = s.method
    mode = "Auto (plain decoding, MTP or prompt lookup)" if method == "auto" else method.label
    lines = [f"# {conv.title}", ""]
    name = model_name(conv, messages)
    if name:
        lines.append(f"- Model: {name}")
    lines += [
        f"- Created: {time.strftime('%Y-%m-%d %H:%M', time.localtime(conv.created_at))}",
        f"- Settings: {s.device}, {mode}, thinking {'on' if s.thinking else 'off'}, "
        f"temperature {s.temperature:g}, max new tokens {s.max_new_tokens}",
        "",
    ]
    if conv.system_prompt:
        lines += ["## System prompt", "", conv.system_prompt, ""]
    for m in messages:
        lines += [f"## {m.role.capitalize()}", ""]
        if m.image_path is not None:
            lines += [f"![image](<{m.image_path}>)", ""]
        if m.reasoning:
            lines += [
                "<details><summary>Reasoning</summary>",
                "",
                m.reasoning,
                "",
                "</details>",
            ]
            lines.append("")
        for done in _tool_rounds(m):
            lines += _round_markdown(done)
        if m.content:
            lines += [m.content, ""]
        if m.status == "incomplete":
            lines += ["*(The answer was interrupted.)*", ""]
        elif m.status == "error":
            lines += [f"*(Failed: {m.error or 'unknown error'})*", ""]
        elif m.status == "streaming":
            lines += ["*(Still being written.)*", ""]
        if m.stats:
            lines += [f"*{stats_summary(m.stats)}*", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _round_markdown(done: ToolRound) -> list[str]:
    """A round of tool calls: the text the model wrote before them, then each call folded
    under its summary, with its arguments and what came of it."""
    lines = [done.content, ""] if done.content.strip() else []
    for call in done.calls:
        label = "Result" if call.status == "ok" else "Outcome"
        lines += [
            f"<details><summary>{_html_text(call_summary(call))}</summary>",
            "",
            f"Function `{call.function}`, arguments:",
            "",
            *_fenced(call.arguments_shown, "json"),
            "",
            f"{label}:",
            "",
            *_fenced(call.result or "(none)", "text"),
            "",
            "</details>",
            "",
        ]
    return lines


def _fenced(text: str, language: str) -> list[str]:
    """`text` as a fenced code block whose fence no run of backticks in it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", text, fence]


def _html_text(text: str) -> str:
    """Text inside an HTML element (a <summary>): its <, > and & as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
