"""The speculative-decoding engine, one job per module:

- `types`: what callers send and get back (messages, settings, load options, step chunks, errors);
- `model_files`: checks on a model folder before OpenVINO sees it;
- `generation`: one running turn, streamed step by step on a worker thread;
- `runtime`: `Engine`, which loads a model and its pipelines and starts turns.

Callers import from the package (`from qwen_mtp_desktop.core.engine import Engine, Message`);
the names below are its public interface.
"""

from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.engine.model_files import (
    DETOKENIZER,
    LANGUAGE_MODEL,
    MTP_MODEL,
    QWEN35_MODEL_TYPES,
    TOKENIZER,
    ModelFiles,
    check_model_dir,
)
from qwen_mtp_desktop.core.engine.types import (
    AnswerStream,
    DecoderName,
    EngineError,
    EngineInterface,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    MessageRole,
    Role,
    StepChunk,
    ToolCallRecord,
    WithinTurnTest,
)

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.engine.generation import MTP_UNVALIDATED_NOTE, Generation
    from qwen_mtp_desktop.core.engine.runtime import EXACT_NUMERICS, Engine

#: Names whose modules load the decoding loop (and numpy, OpenVINO on use): imported when first
#: asked for, so a process that only passes messages and settings around (the window) never
#: loads them before its first paint (issue 28's start time; a test checks).
_LAZY = {
    "Engine": "runtime",
    "EXACT_NUMERICS": "runtime",
    "Generation": "generation",
    "MTP_UNVALIDATED_NOTE": "generation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DETOKENIZER",
    "EXACT_NUMERICS",
    "LANGUAGE_MODEL",
    "MTP_MODEL",
    "MTP_UNVALIDATED_NOTE",
    "QWEN35_MODEL_TYPES",
    "TOKENIZER",
    "AnswerStream",
    "DecoderName",
    "Engine",
    "EngineError",
    "EngineInterface",
    "Generation",
    "GenerationSettings",
    "LoadOptions",
    "LoadedModel",
    "Message",
    "MessageRole",
    "ModelFiles",
    "Role",
    "StepChunk",
    "ToolCallRecord",
    "WithinTurnTest",
    "check_model_dir",
]
