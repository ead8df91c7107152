"""A conversation as a file to keep or share: JSON (everything, with the stats of every
answer) or Markdown (readable, reasoning folded away, one stats line per answer)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from qwen_mtp_desktop.core.chats.records import Conversation, StoredMessage, stats_summary

EXPORT_FORMAT = "qwen-mtp-desktop.chat"
EXPORT_VERSION = 1


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
            "model_dir": conv.model_dir,
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
                "stats": m.stats,
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
    if conv.model_dir:
        lines.append(f"- Model: `{conv.model_dir}`")
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
