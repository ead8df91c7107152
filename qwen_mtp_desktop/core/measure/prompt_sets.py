"""Prompt sets (resources/prompts/*.json, or any JSON file): named lists of prompts that
validation and benchmarks run. Acceptance depends on content, so results stay per set. Read as
untrusted files: every field is checked, and a bad set gets one error that says what to fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.engine import (
    Message,
    Role,
)
from qwen_mtp_desktop.core.errors import MeasurementError
from qwen_mtp_desktop.core.files.paths import resources_dir
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file
from qwen_mtp_desktop.core.measure.records import PromptSetRecord
from qwen_mtp_desktop.core.models.library import is_demo_model

PROMPT_SET_SCHEMA_VERSION = 1


DEFAULT_MAX_NEW_TOKENS = 64


@dataclass(frozen=True)
class PromptCase:
    id: str
    messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        """The last user message (what a table shows)."""
        return self.messages[-1].content


@dataclass(frozen=True)
class PromptSet:
    """A named list of prompts. Acceptance depends on content, so results stay per set.

    File format (resources/prompts/<name>.json)::

        {"schema_version": 1, "name": str, "title": str, "description": str,
         "max_new_tokens": int,               # optional, the set's default generation length
         "prompts": [{"id": str, "user": str, "system": str (optional)}
                     | {"id": str, "messages": [{"role", "content"}, ...]}]}
    """

    name: str
    title: str
    description: str
    prompts: tuple[PromptCase, ...]
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    path: Path | None = None

    def to_json_dict(self) -> PromptSetRecord:
        return {
            "name": self.name,
            "title": self.title,
            "path": str(self.path) if self.path else None,
            "prompt_ids": [p.id for p in self.prompts],
        }


def prompts_dir() -> Path:
    return resources_dir() / "prompts"


def _bad_set(path: Path, why: str) -> MeasurementError:
    return MeasurementError(
        f"The prompt set {path.name} is not usable: {why}.",
        'Each prompt needs an "id" and a "user" text (or "messages"); see resources/prompts/.',
        code="BAD_PROMPT_SET",
    )


def _parse_prompt(path: Path, index: int, raw: object) -> PromptCase:
    if not isinstance(raw, dict):
        raise _bad_set(path, f"prompt {index + 1} is not an object")
    prompt_id = raw.get("id") or f"prompt-{index + 1}"
    if not isinstance(prompt_id, str):
        raise _bad_set(path, f"prompt {index + 1} has a non-text id")
    messages: list[Message] = []
    if "messages" in raw:
        items = raw["messages"]
        if not isinstance(items, list) or not items:
            raise _bad_set(path, f"prompt {prompt_id!r} has no messages")
        for item in items:
            role = item.get("role") if isinstance(item, dict) else None
            content = item.get("content") if isinstance(item, dict) else None
            if role not in ("system", "user", "assistant") or not isinstance(content, str):
                raise _bad_set(path, f"prompt {prompt_id!r} has a malformed message")
            messages.append(Message(_role(role), content))
    else:
        system, user = raw.get("system"), raw.get("user")
        if not isinstance(user, str) or not user.strip():
            raise _bad_set(path, f"prompt {prompt_id!r} has no user text")
        if system is not None:
            if not isinstance(system, str):
                raise _bad_set(path, f"prompt {prompt_id!r} has a non-text system prompt")
            messages.append(Message("system", system))
        messages.append(Message("user", user))
    if messages[-1].role != "user":
        raise _bad_set(path, f"prompt {prompt_id!r} does not end with a user message")
    return PromptCase(prompt_id, tuple(messages))


def _role(value: str) -> Role:
    if value == "system":
        return "system"
    return "assistant" if value == "assistant" else "user"


def read_prompt_set(path: Path) -> PromptSet:
    try:
        raw = read_json_file(path, kind=FileKind(f"The prompt set {path.name}", ""))
    except FileNotFoundError as exc:
        raise MeasurementError(
            f"The prompt set {path} does not exist.",
            f"Use a built-in set ({', '.join(builtin_prompt_set_names())}) or a JSON file.",
            code="BAD_PROMPT_SET",
        ) from exc
    except (OSError, ValueError) as exc:
        raise _bad_set(path, f"it cannot be read as JSON ({exc})") from exc
    if isinstance(raw, list):  # a bare list of prompts is accepted too
        raw = {"prompts": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("prompts"), list) or not raw["prompts"]:
        raise _bad_set(path, 'it has no "prompts" list')
    prompts = tuple(_parse_prompt(path, i, item) for i, item in enumerate(raw["prompts"]))
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        raise _bad_set(path, "two prompts share an id")
    max_new = raw.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise _bad_set(path, "max_new_tokens must be a positive whole number")
    name = raw.get("name") if isinstance(raw.get("name"), str) else path.stem
    title = raw.get("title") if isinstance(raw.get("title"), str) else name
    description = raw.get("description") if isinstance(raw.get("description"), str) else ""
    return PromptSet(str(name), str(title), str(description), prompts, max_new, path)


def builtin_prompt_set_names() -> list[str]:
    folder = prompts_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def builtin_prompt_sets() -> list[PromptSet]:
    return [read_prompt_set(prompts_dir() / f"{name}.json") for name in builtin_prompt_set_names()]


def load_prompt_set(spec: str | Path) -> PromptSet:
    """A built-in set by name ("demo", "code"...) or a JSON file by path."""
    text = str(spec)
    if isinstance(spec, str) and "/" not in text and not text.endswith(".json"):
        path = prompts_dir() / f"{text}.json"
        if not path.is_file():
            raise MeasurementError(
                f"There is no built-in prompt set called {text!r}.",
                f"Choose one of: {', '.join(builtin_prompt_set_names()) or 'none installed'}; "
                "or give the path of a JSON file.",
                code="BAD_PROMPT_SET",
            )
        return read_prompt_set(path)
    return read_prompt_set(Path(spec).expanduser())


def default_prompt_set_name(model_dir: Path) -> str:
    """The demo model only counts and repeats, so real-text sets would tell nothing about it."""
    return "demo" if is_demo_model(model_dir) else "chat"


def prompt_caption(case: PromptCase, index: int, total: int) -> str:
    """How progress names a prompt: its place and its first words, not its internal id
    ("prompt 2/5 “Count from 35 to 52.”")."""
    words = " ".join(case.text.split())
    if len(words) > 40:
        words = words[:39].rstrip() + "…"
    return f"prompt {index + 1}/{total} “{words}”"
