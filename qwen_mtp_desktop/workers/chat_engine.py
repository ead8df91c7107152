"""`ChatEngine`: what the chat asks of an engine, whichever runs its turns.

Two classes offer it: `workers.engine_process.EngineProcess` (the local engine host process)
and `workers.model_router.ModelRouter` (the chat's engine: local turns to the engine process,
remote ones to another machine's server). Both are QObjects, whose metaclass cannot be mixed
with `Protocol`'s, so neither names it as a base: mypy checks each against it where
`model_router` assigns them (`_CONFORMS`).

Signals (`SignalInstance`s, as Qt gives them on an instance):
    loading(Path), loaded(LoadedModel), load_failed(EngineError): a model's load.
    chunks(int, list[StepChunk]), finished(int, GenerationStats), failed(int, EngineError):
        a request's answer, by the id `start_generation()` returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import SignalInstance

from qwen_mtp_desktop.core.engine import GenerationSettings, LoadedModel, LoadOptions, Message


class ChatEngine(Protocol):
    @property
    def loading(self) -> SignalInstance: ...
    @property
    def loaded(self) -> SignalInstance: ...
    @property
    def load_failed(self) -> SignalInstance: ...
    @property
    def chunks(self) -> SignalInstance: ...
    @property
    def finished(self) -> SignalInstance: ...
    @property
    def failed(self) -> SignalInstance: ...

    @property
    def loaded_model(self) -> LoadedModel | None:
        """The model that answers the next turn (None while none is loaded): what the last
        `loaded` said, until an unload, a failed load or the engine's death."""
        ...

    @property
    def plain_ready(self) -> bool:
        """Whether plain decoding runs without loading a pipeline first (Auto's switch cost)."""
        ...

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None: ...

    def unload(self) -> None:
        """Free the loaded model's memory."""
        ...

    def start_generation(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        """Start an answer; its events carry the returned request id."""
        ...

    def cancel(self, request_id: int | None = None) -> None:
        """Stop a request (None: every running one) at its next decoding step."""
        ...

    def shutdown(self, timeout_ms: int = ...) -> bool:
        """Stop what this runs; True when it ended within `timeout_ms`."""
        ...


__all__ = ["ChatEngine"]
