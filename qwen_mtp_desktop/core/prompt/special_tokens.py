"""Typed text is data: it must never become a control token of the model.

The prompt is rendered to text and tokenized again by the runtime, which turns every occurrence
of a special or added token's text (`<|im_end|>`, `<think>`, ...) into that token. A message that
spells one would end the user's turn early or forge a system or assistant turn. The escaper
puts an invisible WORD JOINER (U+2060) after the first character of each occurrence: the text
reads the same, but the tokenizer sees ordinary characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from qwen_mtp_desktop.core.files.safe_files import TOKENIZER_JSON_BYTES, FileKind, read_json_file

#: Invisible, zero-width and not a token boundary hint; it survives copy and paste unchanged.
BREAKER = "\u2060"
#: The ChatML/Qwen control shape, escaped even when a tokenizer.json does not list it.
_CONTROL_SHAPE = r"<\|[^|<>\s]{1,64}\|>"


class SpecialTokenEscaper:
    def __init__(self, tokens: Iterable[str]) -> None:
        texts = sorted({t for t in tokens if len(t) >= 2}, key=len, reverse=True)
        parts = [re.escape(t) for t in texts] + [_CONTROL_SHAPE]
        self._pattern = re.compile("|".join(parts))
        self.tokens = tuple(texts)

    def escape(self, text: str) -> str:
        return self._pattern.sub(lambda m: m.group(0)[0] + BREAKER + m.group(0)[1:], text)

    @classmethod
    def for_model(cls, model_dir: Path) -> SpecialTokenEscaper:
        """The added tokens of the model's tokenizer.json (special or not: the runtime matches
        both), plus the control shape. A missing or damaged file leaves the control shape."""
        try:
            data = read_json_file(
                model_dir / "tokenizer.json",
                kind=FileKind("tokenizer.json", ""),
                max_bytes=TOKENIZER_JSON_BYTES,
            )
        except (OSError, ValueError):
            return cls(())
        added = data.get("added_tokens") if isinstance(data, dict) else None
        tokens = [
            token["content"]
            for token in (added if isinstance(added, list) else [])
            if isinstance(token, dict) and isinstance(token.get("content"), str)
        ]
        return cls(tokens[:100_000])
