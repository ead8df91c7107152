"""The speculative-decoding engine: load a Qwen3.5 OpenVINO model with its MTP head, render a
conversation with the model's own chat template, and stream the answer step by step.

`Engine.generate()` returns a `Generation`: an iterator of `StepChunk`s (one per decoding step,
so an MTP step that had k drafts accepted carries k + 1 tokens) that ends with `stats`. The
OpenVINO call blocks, so it runs on a short-lived worker thread and hands each step over a queue;
cancelling takes effect at the next step and keeps the partial answer.

Runtime facts this relies on (see RUNTIME-NOTES): MTP works through `VLMPipeline` with
`draft_model(dir, device, mtp_mode=True)` and prefix caching off; `ChatHistory` fails with MTP,
so the prompt is rendered with `Tokenizer.apply_chat_template` and sent with
`apply_chat_template=False`.

Plain decoding beside MTP (for Auto, core.adaptive): the MTP pipeline cannot decode without
drafts (num_assistant_tokens=0 raises), so an engine loaded with MTP loads a second, plain
`VLMPipeline` of the same model the first time a request asks for `plain=True` (or
`load_plain()` is called) and then keeps both. Measured on Qwen3.5-0.8B INT4 (CPU): MTP alone
1.74 GiB proportional set (1.77 GiB RSS), both 2.26 GiB (2.81 GiB RSS: the plain pipeline maps
the same weight file, counted twice in RSS; it adds 0.55 GiB of its own compiled buffers).
Users whose model wins with MTP never pay it.

Text turns run on the app's own decoder (core.mtp_decoder: MTP at any depth, or plain at depth
0, greedy, exact) when the model allows it; `LoadedModel.decoder` says which path is loaded and
`decoder_note` why the fast one is not. openvino-genai's pipelines stay for what the fast
decoder does not do: turns with images, sampling, and models it cannot load. They are opened
the first time such a turn comes (plain decoding on the stateful SDPA backend, the fastest
exact plain backend openvino-genai has; MTP on its continuous-batching backend).

With openvino-genai, within a turn the runtime cannot hand a generation from one pipeline to
the other: `generate()`
takes a text prompt and prefills it from scratch (prefix caching is off with MTP, and the
pipelines share no KV or linear-attention state). So a within-turn fall back
(`GenerationSettings.within_turn`) stops the MTP generation at a step boundary and continues with
the plain pipeline on prompt + answer so far: a full re-prefill, done only when the answer's
text re-tokenizes to exactly the generated ids (so greedy output stays plain decoding's) and the
policy predicts the saving exceeds the re-prefill.

Prompt lookup (`GenerationSettings.prompt_lookup`) drafts from n-grams of the prompt and answer
instead of the MTP head, on a third openvino-genai pipeline (`prompt_lookup=True`, continuous
batching) opened on the first such turn; it works without an MTP head too. Its drafts per step
vary, so the stats replay the runtime's candidate search (core.prompt_lookup) to count them.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from qwen_mtp_desktop.core.context_limit import check_fits
from qwen_mtp_desktop.core.decoding import (
    ByteLevelVocab,
    ByteStreamDecoder,
    FinishReason,
    GenerationStats,
    IncrementalDecoder,
    Mode,
    StepDrafts,
    StopStringFilter,
    ThinkingSplitter,
    build_stats,
    vocab_agrees,
)
from qwen_mtp_desktop.core.environment import family_verdict, package_version
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.logs import log_conversation
from qwen_mtp_desktop.core.mtp_decoder import (
    DEFAULT_DRAFT_VOCAB,
    DecoderUnavailableError,
    MtpDecoder,
)
from qwen_mtp_desktop.core.privacy import block_telemetry
from qwen_mtp_desktop.core.prompt_guards import PromptGuards, proven_equal
from qwen_mtp_desktop.core.prompt_lookup import (
    DEFAULT_LOOKUP_TOKENS,
    DEFAULT_MAX_NGRAM_SIZE,
    MAX_LOOKUP_TOKENS,
    MAX_NGRAM_SIZE,
    LookupRecorder,
    replay_lookup,
)
from qwen_mtp_desktop.core.safe_files import FileKind, model_folder_problem, read_json_file

if TYPE_CHECKING:
    import openvino_genai

log = logging.getLogger(__name__)

QWEN35_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe")
LANGUAGE_MODEL = "openvino_language_model"
MTP_MODEL = "openvino_mtp_model"
TOKENIZER = "openvino_tokenizer"
DETOKENIZER = "openvino_detokenizer"
#: Properties that make CPU inference bit-exact enough to compare MTP with plain decoding:
#: bf16 and dynamic activation quantization can flip near-tie argmaxes (RUNTIME-NOTES).
EXACT_NUMERICS = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
MTP_UNVALIDATED_NOTE = (
    "More than one draft token per step is not validated for every model and device; "
    "check with `qwen-mtp-desktop validate`."
)


#: Texts whose tokens must decode the same through tokenizer.json as through the detokenizer.
VOCAB_CHECK_TEXTS = (
    "Count from 1 to 20.\n\n1 2 3 4 5",
    "Grüße, naïve café: ≥ 5 € — “quoted” ‘text’",
    "你好，世界。こんにちは、한국어",
    "emoji 🙂👍🏽 and\ttabs  double  spaces\r\n",
    "<think>\nreasoning\n</think>\n\nanswer",
    "def f(x):\n    return x ** 2  # code {}[]<>",
)


class EngineError(UserFacingError):
    """A model could not be loaded or a generation failed; `code` says which case."""


Role = Literal["system", "user", "assistant"]
#: Asked after every MTP step with (step sizes, step times, prompt tokens, whether switching
#: needs a re-prefill); True = go plain. The fast decoder switches for free (False).
WithinTurnTest = Callable[[Sequence[int], Sequence[float], int, bool], bool]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    image: Path | None = None


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 512
    do_sample: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 20
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop_strings: tuple[str, ...] = ()
    #: Draft tokens the MTP head proposes per step (ignored in baseline mode).
    num_assistant_tokens: int = 1
    thinking: bool = False
    #: Decode without MTP even though the MTP pipeline is loaded (Auto's plain turns); the
    #: engine loads a plain pipeline of the same model the first time.
    plain: bool = False
    #: Auto's within-turn test (see the module docstring); ignored for turns with images.
    within_turn: WithinTurnTest | None = None
    #: Decode exactly max_new_tokens, past end-of-text (benchmarks: equal-length runs).
    ignore_eos: bool = False
    #: Draft by prompt lookup (n-grams of prompt and answer, core.prompt_lookup) instead of
    #: the MTP head, on openvino-genai's prompt-lookup pipeline (opened on first use);
    #: num_assistant_tokens is then the drafts per step.
    prompt_lookup: bool = False
    #: Prompt lookup's longest n-gram searched.
    max_ngram_size: int = DEFAULT_MAX_NGRAM_SIZE

    def validate(self) -> None:
        if self.max_new_tokens < 1:
            raise EngineError("max new tokens must be at least 1.", code="BAD_SETTINGS")
        if self.num_assistant_tokens < 1 and not self.plain:
            raise EngineError(
                "num_assistant_tokens must be at least 1 in MTP mode.",
                "Turn MTP off for plain decoding instead.",
                code="BAD_SETTINGS",
            )
        if self.prompt_lookup:
            self._validate_lookup()
        if self.do_sample and self.temperature <= 0:
            raise EngineError("temperature must be above 0 when sampling.", code="BAD_SETTINGS")
        if not 0 < self.top_p <= 1:
            raise EngineError("top-p must be in (0, 1].", code="BAD_SETTINGS")
        if self.top_k < 0 or self.repetition_penalty <= 0:
            raise EngineError("top-k must be >= 0 and repetition penalty > 0.", code="BAD_SETTINGS")

    def _validate_lookup(self) -> None:
        if self.plain:
            raise EngineError(
                "Prompt lookup and plain decoding were both asked for.",
                "Choose one decoding method.",
                code="BAD_SETTINGS",
            )
        if not 1 <= self.num_assistant_tokens <= MAX_LOOKUP_TOKENS:
            raise EngineError(
                f"Prompt lookup needs 1 to {MAX_LOOKUP_TOKENS} draft tokens per step.",
                code="BAD_SETTINGS",
            )
        if not 1 <= self.max_ngram_size <= MAX_NGRAM_SIZE:
            raise EngineError(
                f"The n-gram size for prompt lookup must be 1 to {MAX_NGRAM_SIZE}.",
                code="BAD_SETTINGS",
            )
        if self.do_sample:
            raise EngineError(
                "Prompt lookup decodes greedily here (temperature 0), so its output equals "
                "plain decoding.",
                "Set temperature to 0, or choose plain decoding to sample.",
                code="LOOKUP_NEEDS_GREEDY",
            )


@dataclass(frozen=True)
class LoadOptions:
    device: str = "CPU"
    #: Use the MTP head when the model has one; False loads plain decoding.
    mtp: bool = True
    #: OpenVINO's compiled-model cache folder (faster second load); None disables it.
    cache_dir: Path | None = None
    #: f32 inference without dynamic quantization, for output-equality checks.
    exact_numerics: bool = False
    #: Decode text turns with the app's own decoder (core.mtp_decoder) when the model allows.
    fast_decoder: bool = True
    #: Rows of the fast decoder's draft vocabulary (core.mtp_decoder.DEFAULT_DRAFT_VOCAB).
    draft_vocab: int = DEFAULT_DRAFT_VOCAB
    #: What decodes plain turns beside the fast decoder: openvino-genai's stateful SDPA
    #: pipeline (measured 1.06-1.23x the fast decoder at depth 0 on Qwen3.5-0.8B INT4 here,
    #: whose explicit Gated DeltaNet states cost a little per step; opened on the first plain
    #: turn) or the fast decoder itself ("fast": no second model in memory).
    plain_decoder: Decoding = "genai"


Decoding = Literal["fast", "genai"]


@dataclass(frozen=True)
class LoadedModel:
    model_dir: Path
    device: str
    mode: Mode
    model_type: str
    load_s: float
    warnings: tuple[str, ...] = ()
    #: What decodes text turns: the app's own decoder or openvino-genai's pipeline.
    decoder: Decoding = "genai"
    #: Why the fast decoder is not used (empty when it is, or when it was not asked for).
    decoder_note: str = ""


@dataclass(frozen=True)
class StepChunk:
    """One decoding step: its token ids and the text they added to each section."""

    token_ids: tuple[int, ...]
    reasoning: str
    answer: str
    #: Seconds since generate() was called.
    elapsed_s: float
    #: How many leading characters of `answer` came from accepted MTP drafts (the rest is the
    #: target's own token), so the UI can show where MTP helped.
    drafted_answer_chars: int = 0

    @property
    def accepted_drafts(self) -> int:
        return max(len(self.token_ids) - 1, 0)


@dataclass(frozen=True)
class ModelFiles:
    """What a model folder holds, as far as loading is concerned."""

    model_type: str
    has_mtp: bool
    warnings: tuple[str, ...] = field(default=())


def check_model_dir(model_dir: Path) -> ModelFiles:
    """Check a folder before handing it to OpenVINO, raising a specific EngineError."""
    if not model_dir.exists() and model_dir.is_symlink():
        try:
            model_dir.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # 3.11 raises RuntimeError for a loop
            if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
                raise EngineError(
                    f"{model_dir} is a symbolic link that leads back to itself (a link loop).",
                    "Point the link at the real model folder, or choose that folder instead.",
                    code="SYMLINK_LOOP",
                ) from exc
    if not model_dir.exists():
        raise EngineError(
            f"The model folder {model_dir} does not exist.",
            "Choose an existing model folder in the Models panel.",
            code="MODEL_NOT_FOUND",
        )
    if not model_dir.is_dir():
        raise EngineError(
            f"{model_dir} is a file, not a model folder.",
            "Choose the folder that holds openvino_language_model.xml.",
            code="MODEL_NOT_FOUND",
        )
    try:
        entries = {entry.name for entry in model_dir.iterdir()}
    except OSError as exc:
        raise EngineError(
            f"The model folder {model_dir} cannot be read ({exc.strerror}).",
            "Check the folder's permissions.",
            code="UNREADABLE",
        ) from exc
    if not entries:
        raise EngineError(
            f"The model folder {model_dir} is empty.",
            "Export a Qwen3.5 checkpoint into it with the Export panel.",
            code="EMPTY_DIR",
        )
    _refuse_special_files(model_dir)
    model_type = _model_type(model_dir, entries)
    if model_type not in QWEN35_MODEL_TYPES:
        what = f"a {model_type!r} model" if model_type else "not a Qwen3.5 model"
        raise EngineError(
            f"{model_dir.name} is {what}; this app runs Qwen3.5 and Qwen3.5-MoE models.",
            "Export a Qwen3.5 checkpoint (model_type qwen3_5 or qwen3_5_moe) in the Export panel.",
            code="NOT_QWEN35",
        )
    if f"{LANGUAGE_MODEL}.xml" not in entries:
        raise EngineError(
            f"{model_dir.name} has no {LANGUAGE_MODEL}.xml; it is not a complete OpenVINO export.",
            "Re-export the checkpoint with the Export panel (task image-text-to-text).",
            code="IR_INCOMPLETE",
        )
    for component in (TOKENIZER, DETOKENIZER):
        if f"{component}.xml" not in entries or f"{component}.bin" not in entries:
            raise EngineError(
                f"{model_dir.name} has no {component}.xml/.bin, so text cannot be "
                "turned into tokens and back.",
                "Re-export the model with tokenizer conversion on (the default), or run "
                "`convert_tokenizer --with-detokenizer` from openvino-tokenizers into it.",
                code="TOKENIZER_MISSING",
            )
    for xml_name in sorted(name for name in entries if name.endswith(".xml")):
        if xml_name != f"{MTP_MODEL}.xml":
            _check_ir_pair(model_dir / xml_name)
    has_mtp = f"{MTP_MODEL}.xml" in entries and f"{MTP_MODEL}.bin" in entries
    warnings: tuple[str, ...] = ()
    if not has_mtp:
        warnings = (
            "This model has no MTP head (openvino_mtp_model.xml), so it runs without "
            "speculative decoding. Re-export it with optimum-intel 2.2 or newer to get one.",
        )
    else:
        # A damaged MTP head costs the speed-up, not the chat: the model decodes plain.
        try:
            _check_ir_pair(model_dir / f"{MTP_MODEL}.xml")
        except EngineError as exc:
            has_mtp = False
            warnings = (
                f"This model's MTP head is damaged ({exc.message.rstrip('.')}), so it runs without "
                "speculative decoding. Re-export the model to get the speed-up back.",
            )
    return ModelFiles(model_type, has_mtp, warnings)


def _model_type(model_dir: Path, entries: set[str]) -> str:
    if "config.json" not in entries:
        if f"{LANGUAGE_MODEL}.xml" in entries or "openvino_model.xml" in entries:
            return ""
        raise EngineError(
            f"{model_dir.name} holds no model (no config.json and no OpenVINO IR).",
            "Choose a folder exported by the Export panel.",
            code="NOT_A_MODEL",
        )
    try:
        config = read_json_file(model_dir / "config.json", kind=FileKind("config.json", ""))
    except (OSError, ValueError) as exc:
        raise EngineError(
            f"{model_dir.name}/config.json cannot be read ({exc}).",
            "Re-export the model; the config file is damaged.",
            code="IR_CORRUPT",
        ) from exc
    model_type = config.get("model_type", "") if isinstance(config, dict) else ""
    return model_type if isinstance(model_type, str) else ""


def _check_ir_pair(xml_path: Path) -> None:
    """Cheap integrity check: the .bin exists and is as long as the IR's constants need."""
    bin_path = xml_path.with_suffix(".bin")
    if not bin_path.is_file():
        raise EngineError(
            f"{xml_path.name} has no {bin_path.name} beside it.",
            "The export is incomplete; re-export the model.",
            code="IR_INCOMPLETE",
        )
    needed = _bin_bytes_needed(xml_path)
    actual = bin_path.stat().st_size
    if needed > actual:
        raise EngineError(
            f"{bin_path.name} is truncated ({actual:,} bytes, the IR needs {needed:,}).",
            "The file was damaged or only partly copied; copy or re-export the model again.",
            code="IR_CORRUPT",
        )


def _bin_bytes_needed(xml_path: Path) -> int:
    """The end of the furthest constant in the .bin, read from the IR's XML."""
    import xml.etree.ElementTree as ElementTree

    needed = 0
    try:
        for _event, element in ElementTree.iterparse(xml_path):
            if element.tag == "data":
                offset, size = element.get("offset"), element.get("size")
                if offset is not None and size is not None:
                    needed = max(needed, int(offset) + int(size))
            elif element.tag == "layer":
                element.clear()
    except (ElementTree.ParseError, ValueError, OSError) as exc:
        raise EngineError(
            f"{xml_path.name} is not a readable OpenVINO IR ({exc}).",
            "The file is damaged or is not an OpenVINO model; re-export the model.",
            code="IR_CORRUPT",
        ) from exc
    return needed


def _check_runtime() -> None:
    versions = {name: package_version(name) for name in ("openvino", "openvino-genai")}
    versions["openvino-tokenizers"] = package_version("openvino-tokenizers")
    verdict = family_verdict(versions)
    if not verdict.ok:
        raise EngineError(
            f"The OpenVINO runtime is not usable: {verdict.message}.",
            "Run `qwen-mtp-desktop doctor` for details.",
            code="RUNTIME_INCOMPATIBLE",
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Check ", "Exception from")):
            return line[:300]
    return text.splitlines()[0][:300] if text else type(exc).__name__


@dataclass(frozen=True)
class _RawStep:
    """What the streamer callback hands over: ids and time only. Decoding them to text happens
    on the consumer's thread, so the native decoding loop waits for as little Python as
    possible (at thousands of tokens/s two detokenizer calls per step cost 10-30 % speed)."""

    token_ids: tuple[int, ...]
    elapsed_s: float


@dataclass(frozen=True)
class _Ended:
    chunk_sizes: list[int]
    chunk_times: list[float]
    total_s: float
    prompt_tokens: int
    finish_reason: FinishReason
    warnings: list[str]
    max_new_tokens: int
    switched_to_plain_at: int | None = None
    #: Prompt lookup: drafts proposed and accepted per chunk (core.prompt_lookup).
    drafts: list[StepDrafts] | None = None
    #: The prompt's ids for a greedy text turn (prompt lookup's replay), else None.
    prompt_ids: list[int] | None = None


class _StepDecoder:
    """Turns step token ids into a `StepChunk`: routes reasoning vs answer, detokenizes
    incrementally and counts how many answer characters came from accepted drafts."""

    def __init__(self, engine: Engine, thinking: bool) -> None:
        tokenizer = engine._tokenizer
        assert tokenizer is not None
        self.splitter = ThinkingSplitter(engine._think_start, engine._think_end, thinking)
        vocab = engine._vocab
        self._reasoning: IncrementalDecoder | ByteStreamDecoder
        self._answer: IncrementalDecoder | ByteStreamDecoder
        if vocab is not None:
            self._reasoning, self._answer = ByteStreamDecoder(vocab), ByteStreamDecoder(vocab)
        else:
            self._reasoning = IncrementalDecoder(lambda ids: tokenizer.decode(ids))
            self._answer = IncrementalDecoder(lambda ids: tokenizer.decode(ids))
        self._answer_started = False

    def step(self, token_ids: tuple[int, ...], elapsed_s: float, final: bool = False) -> StepChunk:
        # In a step of k + 1 tokens the first k are accepted drafts, the last the target's.
        drafted_reasoning_ids, drafted_answer_ids = self.splitter.split(token_ids[:-1])
        own_reasoning_ids, own_answer_ids = self.splitter.split(token_ids[-1:])
        if drafted_reasoning_ids or own_reasoning_ids:
            reasoning = self._reasoning.push(drafted_reasoning_ids + own_reasoning_ids)
        else:
            reasoning = ""
        if drafted_answer_ids:
            drafted_answer = self._answer.push(drafted_answer_ids)
            answer = drafted_answer + self._answer.push(own_answer_ids)
        else:
            drafted_answer = ""
            answer = self._answer.push(own_answer_ids)
        if final:
            reasoning += self._reasoning.flush()
            answer += self._answer.flush()
        drafted_chars = len(drafted_answer)
        if not self._answer_started and answer:
            # Qwen3.5 puts blank lines between </think> and the answer.
            stripped = answer.lstrip("\n")
            drafted_chars = max(drafted_chars - (len(answer) - len(stripped)), 0)
            answer = stripped
            self._answer_started = bool(answer)
        return StepChunk(token_ids, reasoning, answer, elapsed_s, drafted_chars)


def take_ready(
    next_chunk: Callable[[float | None], StepChunk | None],
    timeout: float | None,
    within_s: float | None,
) -> list[StepChunk]:
    """`next_chunks()` of a generation, in this process or another (core.engine_client): the
    first chunk within `timeout` (an empty list when none came), then whatever else is ready,
    for at most `within_s` seconds; StopIteration at the end."""
    first = next_chunk(timeout)
    if first is None:
        return []
    chunks = [first]
    deadline = None if within_s is None else time.monotonic() + within_s
    while deadline is None or time.monotonic() < deadline:
        try:
            chunk = next_chunk(0)
        except StopIteration:
            break
        if chunk is None:
            break
        chunks.append(chunk)
    return chunks


class Generation(Iterator[StepChunk]):
    """A running generation. Iterate it for step chunks; `stats` is set once it is exhausted.

    `cancel()` is thread-safe and stops the generation at its next step; the chunks produced so
    far stay, and the stats say finish_reason="cancelled".
    """

    def __init__(
        self,
        engine: Engine,
        prompt: str,
        config: openvino_genai.GenerationConfig | None,
        settings: GenerationSettings,
        images: list[Any],
    ) -> None:
        """`config` None runs the turn on the engine's fast decoder."""
        self._engine = engine
        self._settings = settings
        loaded_mode: Mode = engine.loaded.mode if engine.loaded is not None else "baseline"
        self._mode: Mode = "baseline" if settings.plain else loaded_mode
        if settings.prompt_lookup:
            self._mode = "lookup"
        self._decoding: Decoding = "fast" if config is None else "genai"
        self._device = engine.loaded.device if engine.loaded is not None else ""
        self._decoder = _StepDecoder(engine, settings.thinking)
        self._queue: queue.SimpleQueue[_RawStep | _Ended | BaseException] = queue.SimpleQueue()
        self._cancel = threading.Event()
        self._finished = False
        self.stats: GenerationStats | None = None
        self.reasoning = ""
        self.answer = ""
        self.token_ids: list[int] = []
        if config is None:
            body: Callable[[], _Ended] = lambda: self._run_fast(prompt)  # noqa: E731
        else:
            body = lambda: self._run(prompt, config, images)  # noqa: E731
        self._thread = threading.Thread(
            target=self._work, args=(body,), name="ov-generate", daemon=True
        )
        self._thread.start()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def __iter__(self) -> Generation:
        return self

    def __next__(self) -> StepChunk:
        chunk = self.next_chunk()
        assert chunk is not None
        return chunk

    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        """The next step chunk; None if `timeout` seconds passed without one; StopIteration at
        the end; EngineError if the generation failed."""
        if self._finished:
            raise StopIteration
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _RawStep):
            return self._take(self._decoder.step(item.token_ids, item.elapsed_s))
        self._finished = True
        self._thread.join()
        if isinstance(item, BaseException):
            raise item
        # The held-back tail of a character split over tokens, if any, ends the answer.
        last = self._decoder.step((), item.total_s, final=True)
        self.stats = build_stats(
            mode=self._mode,
            num_assistant_tokens=self._settings.num_assistant_tokens,
            device=self._device,
            prompt_tokens=item.prompt_tokens,
            chunk_sizes=item.chunk_sizes,
            chunk_times=item.chunk_times,
            total_s=item.total_s,
            reasoning_tokens=self._decoder.splitter.reasoning_tokens,
            answer_tokens=self._decoder.splitter.answer_tokens,
            finish_reason=item.finish_reason,
            warnings=item.warnings,
            max_new_tokens=item.max_new_tokens,
            switched_to_plain_at=item.switched_to_plain_at,
            decoder=self._decoding,
            drafts=item.drafts,
            max_ngram_size=self._settings.max_ngram_size,
        )
        if item.prompt_ids is not None and not self._settings.do_sample:
            settings = self._settings
            k = settings.num_assistant_tokens if settings.prompt_lookup else DEFAULT_LOOKUP_TOKENS
            replay = replay_lookup(item.prompt_ids, self.token_ids, k, settings.max_ngram_size)
            self.stats.lookup_replay = replay.to_json_dict()
        log_conversation("answer", self.answer + last.answer)  # only with debug logging on
        if last.reasoning or last.answer:
            return self._take(last)
        raise StopIteration

    def next_chunks(
        self, timeout: float | None = None, *, within_s: float | None = None
    ) -> list[StepChunk]:
        """The chunks that are ready, waiting up to `timeout` seconds for the first (an empty
        list when none came) and taking more for at most `within_s` seconds (a consumer that
        fell behind still sends text regularly); StopIteration at the end. One wake-up per
        batch instead of per step keeps a consumer from competing with the decoding loop for
        the interpreter."""
        return take_ready(self.next_chunk, timeout, within_s)

    def _take(self, chunk: StepChunk) -> StepChunk:
        self.reasoning += chunk.reasoning
        self.answer += chunk.answer
        self.token_ids.extend(chunk.token_ids)
        return chunk

    def run_to_end(self) -> GenerationStats:
        for _chunk in self:
            pass
        assert self.stats is not None
        return self.stats

    def close(self) -> None:
        """Cancel and wait for the worker thread (safe to call at any time)."""
        self.cancel()
        while not self._finished:
            try:
                next(self)
            except StopIteration:
                break
            except EngineError:
                break

    def _run(
        self, prompt: str, config: openvino_genai.GenerationConfig, images: list[Any]
    ) -> _Ended:
        """The turn on an openvino-genai pipeline."""
        import openvino_genai

        engine = self._engine
        loaded = engine.loaded
        assert loaded is not None
        tokenizer = engine._tokenizer
        assert tokenizer is not None
        use_mtp = self._mode == "mtp"
        lookup = self._mode == "lookup"
        if lookup:
            pipeline = engine._ensure_lookup()
        else:
            pipeline = engine._ensure_mtp_pipeline() if use_mtp else engine._ensure_plain()
        within_turn = self._settings.within_turn if use_mtp and not images else None
        prompt_ids: list[int] = []
        if not images:  # also for prompt lookup's replay (Generation.next_chunk)
            prompt_ids = [int(i) for i in _token_ids(tokenizer, prompt)]
        recorder = None
        if lookup:
            recorder = LookupRecorder(
                prompt_ids,
                config.num_assistant_tokens,
                config.max_ngram_size,
                config.max_new_tokens,
                StopStringFilter(
                    lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False)),
                    self._settings.stop_strings,
                ),
            )
        switch_prompt: list[str] = []
        sizes: list[int] = []
        times: list[float] = []
        all_ids: list[int] = []
        clock = time.perf_counter
        started = clock()
        cancel = self._cancel
        out = self._queue
        running = openvino_genai.StreamingStatus.RUNNING
        stop = openvino_genai.StreamingStatus.STOP

        def switch_to_plain() -> bool:
            """Ask Auto; if it says so and the answer so far re-tokenizes to exactly the ids
            generated, keep the continuation prompt and stop the MTP generation."""
            assert within_turn is not None
            if switch_prompt or not within_turn(sizes, times, len(prompt_ids), True):
                return False
            text = prompt + tokenizer.decode(all_ids, skip_special_tokens=False)
            if [int(i) for i in _token_ids(tokenizer, text)] != prompt_ids + all_ids:
                log.info("within-turn switch skipped: the answer does not re-tokenize exactly")
                return False
            switch_prompt.append(text)
            return True

        class Streamer(openvino_genai.StreamerBase):  # type: ignore[misc]
            # Called by the native loop once per step, which waits for it: keep it minimal.
            def write(self, token: Any) -> openvino_genai.StreamingStatus:
                elapsed = clock() - started
                ids = (token,) if isinstance(token, int) else tuple(token)
                if recorder is not None:
                    ids = tuple(recorder.step(ids, elapsed))
                    if recorder.stopped or cancel.is_set():
                        if ids:
                            all_ids.extend(ids)
                            out.put(_RawStep(ids, elapsed))
                        return stop
                    if not ids:
                        return running
                sizes.append(len(ids))
                times.append(elapsed)
                all_ids.extend(ids)
                out.put(_RawStep(ids, elapsed))
                if cancel.is_set():
                    return stop
                if within_turn is not None and switch_to_plain():
                    return stop
                return running

            def end(self) -> None:
                pass

        if images:
            pipeline.generate(prompt, images=images, generation_config=config, streamer=Streamer())
        else:
            pipeline.generate(prompt, generation_config=config, streamer=Streamer())
        switched_at: int | None = None
        remaining = config.max_new_tokens - len(all_ids)
        ended_early = all_ids and all_ids[-1] in _stop_ids(config)
        if switch_prompt and not cancel.is_set() and remaining > 0 and not ended_early:
            # Continue with plain decoding: a full re-prefill (module docstring).
            switched_at = len(sizes)
            within_turn = None
            plain = engine._ensure_plain()
            plain_config = engine._generation_config(self._settings, plain, mtp=False)
            plain_config.max_new_tokens = remaining
            plain.generate(switch_prompt[0], generation_config=plain_config, streamer=Streamer())
        drafts = None
        finish = self._finish_reason(all_ids, _stop_ids(config), config.max_new_tokens)
        if recorder is not None:
            rest = recorder.flush() if not cancel.is_set() else []
            if rest:
                all_ids.extend(rest)
                out.put(_RawStep(tuple(rest), clock() - started))
            sizes, times, drafts = recorder.step_record()
            if recorder.stopped:
                finish = "stop_string"
            elif finish == "stop_string":  # the runtime saw no stop string: it ended
                finish = "eos"
        total = clock() - started
        prompt_tokens = len(prompt_ids) if prompt_ids else len(_token_ids(tokenizer, prompt))
        return _Ended(
            sizes,
            times,
            total,
            prompt_tokens,
            finish,
            self._turn_warnings(loaded, use_mtp),
            config.max_new_tokens,
            switched_at,
            drafts,
            prompt_ids if not images else None,
        )

    def _run_fast(self, prompt: str) -> _Ended:
        """The turn on the app's own decoder (core.mtp_decoder); same queue protocol as
        `_run`. Stop strings are applied here: tokens that may begin one are held back, and
        the ones that form it are dropped, as openvino-genai does."""
        engine = self._engine
        loaded, decoder, tokenizer = engine.loaded, engine._fast, engine._tokenizer
        assert loaded is not None and decoder is not None and tokenizer is not None
        settings = self._settings
        use_mtp = self._mode == "mtp"
        depth = settings.num_assistant_tokens if use_mtp else 0
        within_turn = settings.within_turn if use_mtp else None
        sizes: list[int] = []
        times: list[float] = []
        emitted: list[int] = []
        clock = time.perf_counter
        started = clock()
        out = self._queue
        switched_at: list[int] = []
        stopped = False

        def wanted_depth() -> int:
            if switched_at:
                return 0
            if within_turn is not None and within_turn(sizes, times, len(prompt_ids), False):
                switched_at.append(len(sizes))
                return 0
            return depth

        def emit(ids: Sequence[int]) -> None:
            elapsed = clock() - started
            sizes.append(len(ids))
            times.append(elapsed)
            emitted.extend(ids)
            out.put(_RawStep(tuple(ids), elapsed))

        prompt_ids = [int(i) for i in _token_ids(tokenizer, prompt)]
        stops = StopStringFilter(
            lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False)),
            settings.stop_strings,
        )
        steps = decoder.generate(
            prompt_ids,
            max_new_tokens=settings.max_new_tokens,
            depth=wanted_depth if within_turn is not None else depth,
            stop_ids=engine._stop_ids,
            cancelled=self._cancel.is_set,
            ignore_eos=settings.ignore_eos,
        )
        for step in steps:
            ready, stopped = stops.push(step)
            if ready:
                emit(ready)
            if stopped:
                steps.close()
                break
        if not stopped and not self._cancel.is_set():
            rest = stops.flush()
            if rest:
                emit(rest)
        return _Ended(
            sizes,
            times,
            clock() - started,
            len(prompt_ids),
            "stop_string"
            if stopped
            else self._finish_reason(emitted, engine._stop_ids, settings.max_new_tokens),
            self._turn_warnings(loaded, use_mtp),
            settings.max_new_tokens,
            switched_at[0] if switched_at else None,
            None,
            prompt_ids,
        )

    def _work(self, body: Callable[[], _Ended]) -> None:
        """The worker thread: run the turn, hand its end (or its error) to the consumer."""
        try:
            self._queue.put(body())
        except Exception as exc:  # the native side raises RuntimeError for everything
            log.exception("generation failed")
            self._queue.put(
                EngineError(
                    f"Generation failed: {_first_line(exc)}",
                    "Try a shorter conversation or reload the model; details are in the log.",
                    code="GENERATION_FAILED",
                )
            )
        finally:
            self._engine._generation_finished(self)

    def _turn_warnings(self, loaded: LoadedModel, use_mtp: bool) -> list[str]:
        warnings = list(loaded.warnings)
        if use_mtp and self._settings.num_assistant_tokens > 1:
            warnings.append(MTP_UNVALIDATED_NOTE)
        return warnings

    def _finish_reason(
        self, token_ids: list[int], stop_ids: set[int] | frozenset[int], max_new_tokens: int
    ) -> FinishReason:
        if self._cancel.is_set():
            return "cancelled"
        if token_ids and token_ids[-1] in stop_ids:
            return "eos"
        if len(token_ids) >= max_new_tokens:
            return "length"
        return "stop_string" if self._settings.stop_strings else "eos"


class Engine:
    """Owns one loaded model. Not thread-safe by itself: one thread (the app's engine
    thread, or a CLI's main thread) calls load/generate/unload; `Generation.cancel()` is the
    only call meant for other threads."""

    def __init__(self) -> None:
        self.loaded: LoadedModel | None = None
        #: The app's own decoder for text turns (None: openvino-genai decodes everything).
        self._fast: MtpDecoder | None = None
        #: Plain turns on the fast decoder too (LoadOptions.plain_decoder == "fast").
        self._plain_on_fast = False
        #: openvino-genai's MTP pipeline (None until a turn needs it when `_fast` is loaded).
        self._pipeline: Any = None
        #: openvino-genai's plain pipeline (stateful SDPA), opened on first use.
        self._plain: Any = None
        #: openvino-genai's prompt-lookup pipeline, opened on the first prompt-lookup turn.
        self._lookup: Any = None
        self._open_args: tuple[Path, str, dict[str, Any]] | None = None
        #: Seconds the plain pipeline beside MTP took to load (None: not loaded).
        self.plain_load_s: float | None = None
        self._tokenizer: Any = None
        self._stop_ids: frozenset[int] = frozenset()
        self._vocab: ByteLevelVocab | None = None
        self._guards: PromptGuards | None = None
        self._think_start: int | None = None
        self._think_end: int | None = None
        self._active: Generation | None = None
        self._lock = threading.Lock()

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> LoadedModel:
        options = options or LoadOptions()
        self.unload()
        model_dir = model_dir.expanduser()
        files = check_model_dir(model_dir)
        _check_runtime()
        block_telemetry()
        properties: dict[str, Any] = {}
        if options.cache_dir is not None:
            options.cache_dir.mkdir(parents=True, exist_ok=True)
            properties["CACHE_DIR"] = str(options.cache_dir)
        if options.exact_numerics:
            properties.update(EXACT_NUMERICS)
        use_mtp = options.mtp and files.has_mtp
        warnings = list(files.warnings)
        if options.mtp and not files.has_mtp:
            log.warning("%s: no MTP head, loading in baseline mode", model_dir)
        _check_device(options.device)
        self._open_args = (model_dir, options.device, dict(properties))
        self._plain_on_fast = options.plain_decoder == "fast"
        started = time.perf_counter()
        note = ""
        if use_mtp and options.fast_decoder:
            self._tokenizer = self._open_tokenizer(model_dir, options.device)
            self._stop_ids = self._model_stop_ids(model_dir)
            try:
                self._fast = MtpDecoder(
                    model_dir,
                    options.device,
                    properties,
                    draft_vocab=options.draft_vocab,
                    special_ids=sorted(self._stop_ids),
                )
            except DecoderUnavailableError as exc:
                note = (
                    f"The fast MTP decoder cannot run this model ({exc}), "
                    "so openvino-genai decodes it."
                )
                log.warning("%s: %s", model_dir, note)
                warnings.append(note)
        if self._fast is None:
            try:
                self._pipeline = self._open_pipeline(
                    model_dir, options.device, properties, mtp=use_mtp
                )
            except EngineError as exc:
                if not (use_mtp and note):
                    raise
                # Neither MTP path can run this model: decode plain, and say why.
                use_mtp = False
                note = f"MTP cannot run on this model: {note} {exc.message} It decodes plain."
                log.warning("%s: %s", model_dir, note)
                warnings[-1] = note
                self._pipeline = self._open_pipeline(
                    model_dir, options.device, properties, mtp=False
                )
            self._tokenizer = self._pipeline.get_tokenizer()
            self._stop_ids = frozenset(_stop_ids(self._pipeline.get_generation_config()))
        load_s = time.perf_counter() - started
        self._think_start = self._single_token_id("<think>")
        self._think_end = self._single_token_id("</think>")
        self._vocab = self._fast_vocab(model_dir, options.cache_dir)
        self._guards = PromptGuards.for_model(model_dir, self._tokenizer)  # issue 19
        mode: Mode = "mtp" if use_mtp else "baseline"
        decoder: Decoding = "fast" if self._fast is not None else "genai"
        self.loaded = LoadedModel(
            model_dir,
            options.device,
            mode,
            files.model_type,
            load_s,
            tuple(warnings),
            decoder,
            note,
        )
        log.info(
            "loaded %s on %s (%s, %s decoder) in %.2f s",
            model_dir,
            options.device,
            mode,
            decoder,
            load_s,
        )
        return self.loaded

    def unload(self) -> None:
        if self._active is not None:
            self._active.close()
        self._fast = None
        self._pipeline = None
        self._plain = None
        self._lookup = None
        self._open_args = None
        self.plain_load_s = None
        self._tokenizer = None
        self._vocab = None
        self._guards = None
        self.loaded = None

    @property
    def plain_ready(self) -> bool:
        """Whether a request with `plain=True` runs without loading anything first."""
        loaded = self.loaded
        if loaded is None:
            return False
        fast_plain = self._fast is not None and self._plain_on_fast
        return fast_plain or loaded.mode != "mtp" or self._plain is not None

    def load_plain(self) -> float:
        """Load openvino-genai's plain pipeline now if plain text turns would need it (nothing
        to do when the fast decoder decodes them); returns the seconds it took."""
        self._require_loaded()
        if self.plain_ready:
            return 0.0
        started = time.perf_counter()
        self._ensure_plain()
        return time.perf_counter() - started

    def _ensure_plain(self) -> Any:
        """openvino-genai's plain pipeline (stateful SDPA), opened on first use."""
        loaded = self.loaded
        assert loaded is not None and self._open_args is not None
        if loaded.mode != "mtp" and self._fast is None:
            return self._pipeline
        if self._plain is None:
            model_dir, device, properties = self._open_args
            started = time.perf_counter()
            self._plain = self._open_pipeline(model_dir, device, properties, mtp=False)
            self.plain_load_s = time.perf_counter() - started
            log.info("loaded the plain pipeline in %.2f s", self.plain_load_s)
        return self._plain

    def _ensure_mtp_pipeline(self) -> Any:
        """openvino-genai's MTP pipeline (turns the fast decoder does not take: images)."""
        if self._pipeline is None:
            assert self._open_args is not None
            model_dir, device, properties = self._open_args
            self._pipeline = self._open_pipeline(model_dir, device, properties, mtp=True)
        return self._pipeline

    def _ensure_lookup(self) -> Any:
        """openvino-genai's prompt-lookup pipeline, opened on the first prompt-lookup turn."""
        if self._lookup is None:
            assert self._open_args is not None
            model_dir, device, properties = self._open_args
            started = time.perf_counter()
            self._lookup = self._open_pipeline(model_dir, device, properties, lookup=True)
            log.info("loaded the prompt-lookup pipeline in %.2f s", time.perf_counter() - started)
        return self._lookup

    def _open_pipeline(
        self,
        model_dir: Path,
        device: str,
        properties: dict[str, Any],
        *,
        mtp: bool = False,
        lookup: bool = False,
    ) -> Any:
        """A `VLMPipeline` of the model: with MTP, on the continuous-batching backend with the
        MTP head as draft model (the only backend openvino-genai runs MTP on); without, on the
        stateful SDPA backend, the fastest exact plain decoding it offers (issue 14: 1.22x the
        continuous-batching one on Qwen3.5-0.8B INT4). Prompt lookup runs on the
        continuous-batching backend too (`prompt_lookup=True`, RUNTIME-NOTES)."""
        import openvino_genai

        try:
            kwargs: dict[str, Any] = dict(properties)
            if mtp or lookup:
                scheduler = openvino_genai.SchedulerConfig()
                # MTP on linear-attention models refuses prefix caching (RUNTIME-NOTES).
                scheduler.enable_prefix_caching = False
                kwargs["scheduler_config"] = scheduler
            if lookup:
                kwargs["prompt_lookup"] = True
            elif mtp:
                kwargs["draft_model"] = openvino_genai.draft_model(
                    str(model_dir), device, mtp_mode=True, **properties
                )
            else:
                kwargs["ATTENTION_BACKEND"] = "SDPA"
            return openvino_genai.VLMPipeline(str(model_dir), device, **kwargs)
        except Exception as exc:
            raise self._load_error(model_dir, device, exc) from exc

    def _open_tokenizer(self, model_dir: Path, device: str) -> Any:
        import openvino_genai

        try:
            return openvino_genai.Tokenizer(str(model_dir))
        except Exception as exc:
            raise self._load_error(model_dir, device, exc) from exc

    def _model_stop_ids(self, model_dir: Path) -> frozenset[int]:
        """End-of-text ids as openvino-genai's pipelines read them: generation_config.json's
        eos and stop ids, else the tokenizer's eos."""
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        path = model_dir / "generation_config.json"
        if path.is_file():
            try:
                config = openvino_genai.GenerationConfig(str(path))
            except Exception as exc:
                log.warning("%s cannot be read (%s); using the tokenizer's eos", path, exc)
        if config.eos_token_id < 0:
            config.set_eos_token_id(self._tokenizer.get_eos_token_id())
        return frozenset(i for i in _stop_ids(config) if i >= 0)

    def render_prompt(self, messages: Sequence[Message], *, thinking: bool = False) -> str:
        """The conversation in the model's own chat template, ending with the assistant turn."""
        tokenizer = self._require_loaded()[1]
        if not messages or messages[-1].role != "user":
            raise EngineError(
                "The conversation must end with a user message.", code="BAD_CONVERSATION"
            )
        guards = self._guards
        assert guards is not None
        history = []
        for message in messages:
            content = guards.escape(message.content)  # typed text never becomes a token
            if message.image is not None:
                content = f"<|vision_start|><|image_pad|><|vision_end|>{content}"
            history.append({"role": message.role, "content": content})
        try:
            guards.check_template(history, thinking)  # bounded, before the native call
        except UserFacingError as exc:
            raise EngineError(exc.message, exc.fix, code=exc.code) from exc
        try:
            rendered: str = tokenizer.apply_chat_template(
                history, add_generation_prompt=True, extra_context={"enable_thinking": thinking}
            )
        except Exception as exc:
            raise EngineError(
                f"The model's chat template could not render this conversation: {_first_line(exc)}",
                "Re-export the model so its tokenizer carries a chat template.",
                code="CHAT_TEMPLATE",
            ) from exc
        return rendered

    def generate(
        self, messages: Sequence[Message], settings: GenerationSettings | None = None
    ) -> Generation:
        settings = settings or GenerationSettings()
        settings.validate()
        self._require_loaded()
        prompt = self.render_prompt(messages, thinking=settings.thinking)
        self._check_context(prompt)
        log_conversation("prompt", prompt)  # only with debug logging on
        images = [_load_image(m.image) for m in messages if m.image is not None]
        return self._start(prompt, settings, images)

    def generate_raw(self, prompt: str, settings: GenerationSettings | None = None) -> Generation:
        """Generate from an already rendered prompt (validation and benchmarks use this)."""
        settings = settings or GenerationSettings()
        settings.validate()
        self._require_loaded()
        self._check_context(prompt)
        return self._start(prompt, settings, [])

    def _start(self, prompt: str, settings: GenerationSettings, images: list[Any]) -> Generation:
        loaded = self._require_loaded()[0]
        if settings.prompt_lookup and images:
            # The runtime expands an image into hundreds of prompt tokens the app cannot see,
            # so its drafts could not be counted: such turns decode as if lookup were off.
            log.info("prompt lookup is not used for a turn with images")
            settings = replace(settings, prompt_lookup=False)
        lookup = settings.prompt_lookup
        use_mtp = loaded.mode == "mtp" and not settings.plain and not lookup
        if use_mtp and settings.do_sample:
            # openvino-genai 2026.4: "MTP streaming only supports batch size=1 with greedy
            # decoding" (mtp_strategy.cpp); refuse up front instead of failing mid-request.
            raise EngineError(
                "Sampling (temperature above 0) does not work with MTP in this OpenVINO GenAI "
                "release; MTP decodes greedily.",
                "Set temperature to 0, or turn MTP off to sample.",
                code="MTP_NEEDS_GREEDY",
            )
        # MTP text turns on the app's decoder; plain ones on the fastest plain path
        # (LoadOptions.plain_decoder). A within-turn switch stays on the app's decoder.
        fast = (
            not lookup
            and self._fast is not None
            and not images
            and not settings.do_sample
            and (use_mtp or self._plain_on_fast)
        )
        with self._lock:
            if self._active is not None:
                raise EngineError("A generation is already running.", "Stop it first.", code="BUSY")
            config = None
            if lookup:
                config = self._generation_config(settings, self._ensure_lookup(), mtp=False)
                config.num_assistant_tokens = settings.num_assistant_tokens
                config.max_ngram_size = settings.max_ngram_size
                config.stop_strings = set()  # applied by the app (core.prompt_lookup)
            elif not fast:
                pipeline = self._ensure_mtp_pipeline() if use_mtp else self._ensure_plain()
                config = self._generation_config(settings, pipeline, mtp=use_mtp)
            generation = Generation(self, prompt, config, settings, images)
            self._active = generation
        return generation

    def _generation_finished(self, generation: Generation) -> None:
        with self._lock:
            if self._active is generation:
                self._active = None

    def _generation_config(
        self, settings: GenerationSettings, pipeline: Any, *, mtp: bool
    ) -> openvino_genai.GenerationConfig:
        config = pipeline.get_generation_config()
        config.max_new_tokens = settings.max_new_tokens
        config.apply_chat_template = False
        config.do_sample = settings.do_sample
        if settings.do_sample:
            config.temperature = settings.temperature
            config.top_p = settings.top_p
            config.top_k = settings.top_k
            if settings.seed is not None:
                config.rng_seed = settings.seed
        config.repetition_penalty = settings.repetition_penalty
        config.ignore_eos = settings.ignore_eos
        if settings.stop_strings:
            config.stop_strings = set(settings.stop_strings)
            config.include_stop_str_in_output = False
        if mtp:
            config.num_assistant_tokens = settings.num_assistant_tokens
        return config

    def require_loaded(self) -> LoadedModel:
        """The loaded model; EngineError NOT_LOADED when there is none."""
        return self._require_loaded()[0]

    def _require_loaded(self) -> tuple[LoadedModel, Any]:
        if self.loaded is None or self._tokenizer is None:
            raise EngineError("No model is loaded.", "Load a model first.", code="NOT_LOADED")
        return self.loaded, self._tokenizer

    def _check_context(self, prompt: str) -> None:
        guards = self._guards
        if guards is not None and guards.context_length is not None:
            try:
                check_fits(len(_token_ids(self._tokenizer, prompt)), guards.context_length)
            except UserFacingError as exc:
                raise EngineError(exc.message, exc.fix, code=exc.code) from exc

    def _fast_vocab(self, model_dir: Path, cache_dir: Path | None = None) -> ByteLevelVocab | None:
        """The model's byte-level vocabulary for streaming text, when it decodes exactly like
        the runtime's detokenizer (checked here); None keeps the detokenizer."""
        started = time.perf_counter()
        vocab = ByteLevelVocab.from_tokenizer_json(model_dir / "tokenizer.json")
        if vocab is None:
            return None
        tokenizer = self._tokenizer
        samples = [[int(i) for i in _token_ids(tokenizer, text)] for text in VOCAB_CHECK_TEXTS]
        if not vocab_agrees(
            vocab, lambda ids: str(tokenizer.decode(ids)), samples
        ) or not proven_equal(vocab, tokenizer, model_dir, cache_dir):
            log.warning("%s: tokenizer.json decodes differently; using the detokenizer", model_dir)
            return None
        log.info("byte-level vocabulary ready in %.2f s", time.perf_counter() - started)
        return vocab

    def _single_token_id(self, text: str) -> int | None:
        ids = _token_ids(self._tokenizer, text)
        return int(ids[0]) if len(ids) == 1 else None

    @staticmethod
    def _load_error(model_dir: Path, device: str, exc: Exception) -> EngineError:
        detail = _first_line(exc)
        lowered = str(exc).lower()
        if "device" in lowered and device.upper() not in ("CPU",) and "not" in lowered:
            return EngineError(
                f"The {device} device is not available: {detail}",
                "Choose another device (CPU always works), or install its driver.",
                code="DEVICE_UNAVAILABLE",
            )
        return EngineError(
            f"OpenVINO could not load {model_dir.name}: {detail}",
            "Check it in the Models panel (Verify); if files are damaged, re-export the model.",
            code="LOAD_FAILED",
        )


def _token_ids(tokenizer: Any, text: str) -> Sequence[int]:
    ids: Sequence[int] = tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]
    return ids


def _stop_ids(config: openvino_genai.GenerationConfig) -> set[int]:
    return set(config.stop_token_ids) | {config.eos_token_id}


def _load_image(path: Path) -> Any:
    """An image file as the uint8 NHWC tensor the VLM pipeline expects."""
    import numpy as np
    import openvino
    from PIL import Image

    try:
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise EngineError(
            f"The image {path.name} cannot be read ({exc}).",
            "Attach a PNG or JPEG file.",
            code="IMAGE",
        ) from exc
    return openvino.Tensor(array[None])


def _refuse_special_files(model_dir: Path) -> None:
    """A FIFO or device in the folder would block the native loader forever, and its JSON
    side files are parsed natively: both are checked first (issue 19, core.safe_files)."""
    problem = model_folder_problem(model_dir)
    if problem is not None:
        code, message = problem
        raise EngineError(
            f"{message}; the model was not loaded.",
            "Replace the file with the real one (or remove it), or re-export the model.",
            code=code,
        )


def _check_device(device: str) -> None:
    from qwen_mtp_desktop.core.devices import available_devices, missing_device_error

    try:
        found = available_devices()
    except Exception:  # no device list: let the runtime report it
        return
    problem = missing_device_error(device, found)
    if problem is not None:
        raise EngineError(problem.message, problem.fix, code=problem.code)
