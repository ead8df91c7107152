"""What the engine checks about a loaded model before text reaches the runtime (issue 19):
one object per loaded model, so the engine needs only a call at each point.

- typed text is escaped so it never spells a control token (core.prompt.special_tokens);
- the chat template renders under limits before the native call (core.prompt.template);
- the prompt must fit the model's context (core.prompt.context_limit);
- the fast detokenizer is proven equal to the runtime's on every id (core.prompt.vocab_proof);
- text must be encodable as UTF-8 (`text_problem`): a command-line argument that was not
  UTF-8 reaches Python as lone surrogates, which the runtime's JSON layer rejected with an
  internal "JsonContainer" message (issue 29).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import FileKind, int_in_range, read_json_object
from qwen_mtp_desktop.core.prompt.context_limit import context_length
from qwen_mtp_desktop.core.prompt.special_tokens import SpecialTokenEscaper
from qwen_mtp_desktop.core.prompt.template import TemplateGuard
from qwen_mtp_desktop.core.prompt.vocab_proof import ByteTable, cached_prove, prove

log = logging.getLogger(__name__)


def text_problem(text: str) -> str | None:
    """Why `text` cannot be sent to the runtime (it is not UTF-8 text), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, kept by Python's surrogateescape
            return (
                f"character {exc.start + 1} is the byte 0x{code - 0xDC00:02X}, which is not UTF-8"
            )
        return f"character {exc.start + 1} is an unpaired UTF-16 surrogate (U+{code:04X})"
    return None


def check_text(text: str, what: str) -> None:
    """UserFacingError BAD_TEXT naming `what` ("The user message") when `text` is not UTF-8."""
    problem = text_problem(text)
    if problem is not None:
        raise UserFacingError(
            f"{what} is not valid text: {problem}.",
            "Write or save the text as UTF-8 (or remove that character) and try again.",
            code="BAD_TEXT",
        )


@dataclass(frozen=True)
class PromptGuards:
    escaper: SpecialTokenEscaper
    template: TemplateGuard
    context_length: int | None

    @classmethod
    def for_model(cls, model_dir: Path, tokenizer: Any) -> PromptGuards:
        """`tokenizer`: the runtime's openvino_genai.Tokenizer; its template is the one used."""
        try:
            template = str(tokenizer.chat_template)
        except Exception:  # an older runtime without the property: nothing to guard with
            template = ""
        return cls(
            SpecialTokenEscaper.for_model(model_dir),
            TemplateGuard(template),
            context_length(model_dir),
        )

    def escape(self, text: str) -> str:
        return self.escaper.escape(text)

    def check_template(
        self,
        history: Sequence[Mapping[str, Any]],
        thinking: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        context: dict[str, Any] = {"enable_thinking": thinking}
        if tools:
            context["tools"] = [dict(tool) for tool in tools]
        self.template.render(history, extra_context=context)


def emitted_vocab_size(model_dir: Path) -> int:
    """How many ids the model's output layer has (config.json vocab_size), 0 if unknown."""
    try:
        config = read_json_object(model_dir / "config.json", kind=FileKind("config.json", ""))
    except (OSError, ValueError):
        return 0
    text = config.get("text_config")
    for source in (text if isinstance(text, dict) else {}, config):
        value = int_in_range(source.get("vocab_size"), 1, 4_000_000)
        if value is not None:
            return value
    return 0


def proven_equal(vocab: ByteTable, tokenizer: Any, model_dir: Path, cache_dir: Path | None) -> bool:
    """Whether `vocab` decodes every id the model can emit like the runtime's detokenizer."""
    from qwen_mtp_desktop.core.system.environment import package_version

    def run() -> Any:
        return prove(
            vocab,
            lambda batch: [str(text) for text in tokenizer.decode(batch)],
            emitted_vocab_size(model_dir),
        )

    version = package_version("openvino-tokenizers") or "?"
    result = cached_prove(model_dir, cache_dir, version, run)
    if result.ok:
        log.info(
            "byte table proven equal to the detokenizer on %d ids (+%d in context) in %.3f s%s",
            result.checked_ids,
            result.context_checks,
            result.seconds,
            " (cached)" if result.cached else "",
        )
    else:
        log.warning("byte table differs from the detokenizer at ids %s", result.mismatches)
    return result.ok
