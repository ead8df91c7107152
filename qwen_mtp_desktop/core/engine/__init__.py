"""The speculative-decoding engine, one job per module:

- `types`: what callers send and get back (messages, settings, load options, step chunks, errors);
- `model_files`: checks on a model folder before OpenVINO sees it;
- `generation`: one running turn, streamed step by step on a worker thread;
- `runtime`: `Engine`, which loads a model and its pipelines and starts turns.

Callers import from the package (`from qwen_mtp_desktop.core.engine import Engine, Message`);
the names below are its public interface.
"""

from qwen_mtp_desktop.core.engine.generation import MTP_UNVALIDATED_NOTE, Generation
from qwen_mtp_desktop.core.engine.model_files import (
    DETOKENIZER,
    LANGUAGE_MODEL,
    MTP_MODEL,
    QWEN35_MODEL_TYPES,
    TOKENIZER,
    ModelFiles,
    check_model_dir,
)
from qwen_mtp_desktop.core.engine.runtime import EXACT_NUMERICS, Engine
from qwen_mtp_desktop.core.engine.types import (
    AnswerStream,
    Decoding,
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    Role,
    StepChunk,
    WithinTurnTest,
)

__all__ = [
    "DETOKENIZER",
    "EXACT_NUMERICS",
    "LANGUAGE_MODEL",
    "MTP_MODEL",
    "MTP_UNVALIDATED_NOTE",
    "QWEN35_MODEL_TYPES",
    "TOKENIZER",
    "AnswerStream",
    "Decoding",
    "Engine",
    "EngineError",
    "Generation",
    "GenerationSettings",
    "LoadOptions",
    "LoadedModel",
    "Message",
    "ModelFiles",
    "Role",
    "StepChunk",
    "WithinTurnTest",
    "check_model_dir",
]
