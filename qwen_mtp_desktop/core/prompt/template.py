"""A model's chat template is untrusted code: find it where the runtime does, and render it
under limits before the runtime's native renderer ever sees it.

The runtime renders with `Tokenizer.apply_chat_template` (native Jinja). A template from the
internet can recurse until the native stack overflows (SIGSEGV: the whole app dies), loop for
minutes, or produce gigabytes, and none of that can be interrupted from Python once the native
call runs. So every conversation is first rendered here, in Python, with Jinja's sandbox and
hard limits on time, call depth and output size; only a template that stays within them goes
to the native call, which then does the same bounded work. Any failure is a CHAT_TEMPLATE error.

Why not a subprocess probe at load time: a template's cost depends on the conversation (a
macro may recurse once per message or per character), so a probe with a sample conversation
proves nothing about the next turn. Rendering in Python costs about a millisecond per turn.

`template_source` mirrors where the runtime finds the template (the tokenizer IR's rt_info
`chat_template` when the key is there, else `chat_template.jinja`, else the JSON files that can
carry one), so `models inspect` reports what the runtime will use.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    NotRegularFileError,
    UnsafeFileError,
    read_json_file,
    read_text_file,
)

#: Limits for one render. Real templates (Qwen3.5's) render a long chat in a few ms, nest
#: macros a few levels, and produce about as much text as the conversation holds.
TIME_LIMIT_S = 2.0
MAX_DEPTH = 64
#: The prompt can be at most the context (262k tokens for Qwen3.5, ~4 characters each).
MAX_OUTPUT_CHARS = 4 * 1024 * 1024
MAX_TEMPLATE_CHARS = 256 * 1024
SIDE_FILE = "chat_template.jinja"
_FIX = "Use the model's original chat template (re-export it from its publisher's checkpoint)."
_BIG_WIDTH = re.compile(r"\d{7,}")


class ChatTemplateError(UserFacingError):
    code = "CHAT_TEMPLATE"


class _LimitReachedError(Exception):
    """Raised inside the render when a limit is reached (never shown as is)."""


# --- where the runtime finds the template ---------------------------------------------------


@dataclass(frozen=True)
class TemplateSource:
    text: str | None
    #: Where the text came from: "tokenizer" (the IR's rt_info) or a file name; None when
    #: nothing holds a template.
    origin: str | None
    #: Why the runtime cannot use the model's template (its tokenizer fails to load, or the
    #: template cannot be read); None when there is no such problem.
    problem: str | None = None

    @property
    def usable(self) -> bool:
        return (
            bool(self.text and self.text.strip())
            and len(self.text or "") <= MAX_TEMPLATE_CHARS
            and self.problem is None
        )


#: The files openvino-genai 2026.4 reads a template from, in its order; each one present
#: overrides the ones before it (tokenizer_impl.cpp, setup_tokenizer).
_JSON_SOURCES = ("tokenizer_config.json", "processor_config.json", "chat_template.json")


def template_source(model_dir: Path, rt_info: Mapping[str, object] | None) -> TemplateSource:
    """The template the runtime (openvino-genai 2026.4) ends up with, found the way it finds
    it: tokenizer_config.json, processor_config.json and chat_template.json ("chat_template":
    a string, or a list holding {"name": "default", "template": ...}), then
    chat_template.jinja, each present one overriding the one before (a blank side file gives
    a blank template); then the tokenizer IR's rt_info `chat_template` (`rt_info`: that IR's),
    whose presence overrides them all, even when empty. Measured: one of those JSON files
    that is not valid JSON makes the tokenizer fail to load, and so does a side file that is
    not a regular file; one that is not UTF-8 leaves a template Python cannot read (unless
    rt_info overrides it)."""
    text: str | None = None
    origin: str | None = None
    for name in _JSON_SOURCES:
        path = model_dir / name
        if not path.exists():  # the runtime's std::filesystem::exists: links followed
            continue
        try:
            data = read_json_file(path, kind=FileKind(name, _FIX))
        except (UnsafeFileError, OSError) as exc:
            message = exc.message if isinstance(exc, UnsafeFileError) else str(exc)
            return TemplateSource(None, name, problem=message)
        found = _json_template(data)
        if found is not None:
            text, origin = found, name
    side = model_dir / SIDE_FILE
    unreadable: str | None = None  # the side file's text cannot be known (not UTF-8, too big)
    if side.exists():
        try:
            text = read_text_file(
                side, max_bytes=MAX_TEMPLATE_CHARS, kind=FileKind(SIDE_FILE, _FIX)
            )
        except NotRegularFileError as exc:  # the runtime's tokenizer fails to load
            return TemplateSource(None, SIDE_FILE, problem=exc.message)
        except (UnsafeFileError, OSError) as exc:
            text = None
            unreadable = exc.message if isinstance(exc, UnsafeFileError) else str(exc)
        origin = SIDE_FILE
    if rt_info is not None and "chat_template" in rt_info:
        value = rt_info["chat_template"]
        if isinstance(value, Mapping):  # <chat_template><default value="..."/></chat_template>
            value = value.get("default")
        if isinstance(value, str):  # anything else: the runtime warns and keeps the files'
            return TemplateSource(value, "tokenizer")
    if unreadable is not None:
        return TemplateSource(None, SIDE_FILE, problem=unreadable)
    return TemplateSource(text, origin)


def _json_template(data: object) -> str | None:
    """A JSON file's "chat_template" as the runtime reads it (None: it keeps the previous)."""
    if not isinstance(data, dict):
        return None
    field = data.get("chat_template")
    if isinstance(field, str):
        return field
    if isinstance(field, list):
        for item in field:
            if (
                isinstance(item, dict)
                and item.get("name") == "default"
                and isinstance(item.get("template"), str)
            ):
                return str(item["template"])
    return None


# --- the bounded render -----------------------------------------------------------------------


def _too_big(value: object) -> bool:
    return isinstance(value, str | bytes | list | tuple | dict) and len(value) > MAX_OUTPUT_CHARS


def _check_args(args: Iterable[Any]) -> None:
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > MAX_OUTPUT_CHARS:
            raise _LimitReachedError(f"a size argument of {arg}")
        if isinstance(arg, str) and ("{" in arg or "%" in arg) and _BIG_WIDTH.search(arg):
            raise _LimitReachedError("a format width of millions of characters")


def _environment() -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        """Sizes are checked before an operation allocates, not after."""

        intercepted_binops = frozenset(["*", "+", "%", "**"])

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "*":
                for seq, count in ((left, right), (right, left)):
                    if (
                        isinstance(seq, str | list | tuple)
                        and isinstance(count, int)
                        and len(seq) * max(count, 0) > MAX_OUTPUT_CHARS
                    ):
                        raise _LimitReachedError("a repeated string of more than the output limit")
            elif operator == "+":
                if _too_big(left) or _too_big(right):
                    raise _LimitReachedError("a string longer than the output limit")
                if (
                    isinstance(left, str | list)
                    and isinstance(right, str | list)
                    and len(left) + len(right) > MAX_OUTPUT_CHARS
                ):
                    raise _LimitReachedError("a string longer than the output limit")
            elif operator == "**":
                if isinstance(right, int) and abs(right) > 64:
                    raise _LimitReachedError("a huge power")
            elif operator == "%":
                _check_args([left, *(right if isinstance(right, tuple) else (right,))])
            result = super().call_binop(context, operator, left, right)
            if _too_big(result):
                raise _LimitReachedError("a value longer than the output limit")
            return result

        def wrap_str_format(self, value: Any) -> Any:
            # Jinja hands templates `str.format`/`format_map` as a wrapper of its own (no
            # `__self__` left for `call` to check), so the format string is checked here,
            # when the method is looked up: '{:>1000000000}'.format(1) allocated 1 GB first.
            if getattr(value, "__name__", None) in ("format", "format_map"):
                _check_args([getattr(value, "__self__", None)])
            return super().wrap_str_format(value)

        def call(self, context: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
            _check_args([*args, *kwargs.values(), getattr(obj, "__self__", None)])
            result = super().call(context, obj, *args, **kwargs)
            if _too_big(result):
                raise _LimitReachedError("a value longer than the output limit")
            return result

    def raise_exception(message: str) -> None:
        from jinja2.exceptions import TemplateError

        raise TemplateError(message)

    def strftime_now(fmt: str) -> str:
        return time.strftime(fmt[:100])

    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    for name, func in list(env.filters.items()):
        env.filters[name] = _bounded_filter(func)
    env.filters["tojson"] = _bounded_filter(_tojson)
    return env


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _bounded_filter(func: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_args([a for a in (*args, *kwargs.values()) if not _is_context(a)])
        result = func(*args, **kwargs)
        if _too_big(result):
            raise _LimitReachedError("a filter result longer than the output limit")
        return result

    for attribute in ("jinja_pass_arg",):  # keep @pass_context / @pass_environment markers
        if hasattr(func, attribute):
            setattr(bounded, attribute, getattr(func, attribute))
    return bounded


def _is_context(value: object) -> bool:
    return type(value).__module__.startswith("jinja2")


class _Watch:
    """A per-thread trace on the template's own frames: a deadline and a call-depth limit,
    checked on every line the template runs (so a loop without output is bounded too)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.depth = 0

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        if time.perf_counter() > self.deadline:
            raise _LimitReachedError(f"rendering took more than {TIME_LIMIT_S:g} s")
        if not frame.f_code.co_filename.startswith("<template"):
            return None
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _LimitReachedError(f"macros call each other more than {MAX_DEPTH} levels deep")
        return self.local_trace

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            self.depth -= 1
        elif time.perf_counter() > self.deadline:
            raise _LimitReachedError(f"rendering took more than {TIME_LIMIT_S:g} s")
        return self.local_trace


class TemplateGuard:
    """Renders a chat template under limits; `check()` raises ChatTemplateError."""

    def __init__(self, template: str | None) -> None:
        self.template = template
        self.problem: str | None = None
        self._compiled: Any = None
        if not template or not template.strip():
            self.problem = "the model has no chat template"
            return
        if len(template) > MAX_TEMPLATE_CHARS:
            self.problem = f"its chat template is {len(template):,} characters long"
            return
        try:
            self._compiled = _environment().from_string(template)
        except Exception as exc:  # jinja2 raises TemplateSyntaxError and others
            self.problem = f"its chat template is not valid Jinja ({_short(exc)})"

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        extra_context: Mapping[str, Any] | None = None,
    ) -> str:
        if self._compiled is None:
            raise ChatTemplateError(
                f"The conversation cannot be formatted: {self.problem}.",
                _FIX,
            )
        context = {
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            **(extra_context or {}),
        }
        watch = _Watch(time.perf_counter() + TIME_LIMIT_S)
        previous = sys.gettrace()
        pieces: list[str] = []
        total = 0
        sys.settrace(watch.global_trace)
        try:
            for piece in self._compiled.generate(context):
                total += len(piece)
                if total > MAX_OUTPUT_CHARS:
                    raise _LimitReachedError(
                        f"it produced more than {MAX_OUTPUT_CHARS:,} characters"
                    )
                if time.perf_counter() > watch.deadline:
                    raise _LimitReachedError(f"rendering took more than {TIME_LIMIT_S:g} s")
                pieces.append(piece)
        except _LimitReachedError as exc:
            raise ChatTemplateError(
                f"The model's chat template was stopped: {exc}. A chat template that does "
                "this is broken or hostile.",
                _FIX,
            ) from None
        except RecursionError:
            raise ChatTemplateError(
                "The model's chat template recurses without end.", _FIX
            ) from None
        except MemoryError:
            raise ChatTemplateError(
                "The model's chat template needs too much memory.", _FIX
            ) from None
        except Exception as exc:  # the template's own raise_exception, type errors, ...
            raise ChatTemplateError(
                f"The model's chat template could not render this conversation: {_short(exc)}",
                _FIX,
            ) from exc
        finally:
            sys.settrace(previous)
        return "".join(pieces)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
