"""`Engine`: loads a Qwen3.5 OpenVINO model, renders a conversation with the model's own chat
template and starts `Generation`s on the right decoder.

Text turns run on the app's own decoder (core.decoding.decoder) whatever their method: plain
decoding, MTP at any depth or prompt lookup, greedy, sampled (exact speculative sampling) or
constrained by a grammar. It keeps each conversation's state between turns, so a turn prefills
only what the kept state lacks; one decoder for every text turn also means Auto's switches
between plain decoding and MTP keep that state, with one model in memory. `LoadedModel.decoder`
says which path is loaded and `decoder_note` why the app's decoder is not.

openvino-genai's pipelines stay for what the app's decoder does not do: turns with images (its
MTP pipeline for greedy MTP, its stateful SDPA plain pipeline otherwise), models whose IR the
app's decoder cannot read (then its MTP and prompt lookup decode greedily, and nothing is kept
between turns), and, when `LoadOptions.plain_decoder` is "genai", plain text turns (the
benchmark's fastest-plain-path row). They are opened the first time such a turn comes.

Runtime facts this relies on (see RUNTIME-NOTES): MTP works through `VLMPipeline` with
`draft_model(dir, device, mtp_mode=True)` and prefix caching off; `ChatHistory` fails with MTP,
so the prompt is rendered with `Tokenizer.apply_chat_template` and sent with
`apply_chat_template=False`; openvino-genai's default sampling seed is fixed, so a sampled turn
without a seed gets a fresh one (reported in its stats).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.decoder import (
    AppDecoder,
    DecoderUnavailableError,
)
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.sampling import fresh_seed
from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.decoding.text import ByteLevelVocab, vocab_agrees
from qwen_mtp_desktop.core.engine.context_fit import Encoded, fit_context
from qwen_mtp_desktop.core.engine.generation import (
    Generation,
    TurnResources,
    config_stop_ids,
    encode_ids,
)
from qwen_mtp_desktop.core.engine.model_files import check_model_dir, weight_file_bytes
from qwen_mtp_desktop.core.engine.template_history import (
    ends_with_prompt,
    template_history,
    template_tools,
)
from qwen_mtp_desktop.core.engine.types import (
    DecoderName,
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.errors import UserFacingError, native_error_line
from qwen_mtp_desktop.core.prompt.context_limit import check_fits
from qwen_mtp_desktop.core.prompt.guards import PromptGuards, check_text, proven_equal
from qwen_mtp_desktop.core.system.environment import family_verdict, package_version
from qwen_mtp_desktop.core.system.logs import log_conversation
from qwen_mtp_desktop.core.system.privacy import block_telemetry
from qwen_mtp_desktop.core.system.state_budget import automatic_bytes, continuation_fits

if TYPE_CHECKING:
    import openvino_genai


log = logging.getLogger(__name__)


#: Properties that make CPU inference bit-exact enough to compare MTP with plain decoding:
#: bf16 and dynamic activation quantization can flip near-tie argmaxes (RUNTIME-NOTES).
#: The KV cache too: stored as u8 by default, so splitting the same tokens over other calls
#: changed logits by up to 1.8 in f32 on Qwen3.5-0.8B (1e-3 with an f32 cache).
EXACT_NUMERICS = {
    "INFERENCE_PRECISION_HINT": "f32",
    "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0",
    "KV_CACHE_PRECISION": "f32",
}
#: openvino-genai's top_k for "keep every token" (its default; Sampling's top_k 0).
ALL_TOKENS = 2**64 - 1
#: Texts whose tokens must decode the same through tokenizer.json as through the detokenizer.
VOCAB_CHECK_TEXTS = (
    "Count from 1 to 20.\n\n1 2 3 4 5",
    "Grüße, naïve café: ≥ 5 € — “quoted” ‘text’",
    "你好，世界。こんにちは、한국어",
    "emoji 🙂👍🏽 and\ttabs  double  spaces\r\n",
    "<think>\nreasoning\n</think>\n\nanswer",
    "def f(x):\n    return x ** 2  # code {}[]<>",
)


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


class Engine:
    """Owns one loaded model. Not thread-safe by itself: one thread (the app's engine
    thread, or a CLI's main thread) calls load/generate/unload; `Generation.cancel()` is the
    only call meant for other threads."""

    def __init__(self) -> None:
        self.loaded: LoadedModel | None = None
        #: The app's own decoder for text turns (None: openvino-genai decodes everything).
        self._fast: AppDecoder | None = None
        #: Plain turns on the fast decoder too (LoadOptions.plain_decoder == "app").
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
        self._message_start: int | None = None
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
            log.warning("%s: no MTP head, loading for plain decoding", model_dir)
        _check_device(options.device)
        self._open_args = (model_dir, options.device, dict(properties))
        self._plain_on_fast = options.plain_decoder == "app"
        started = time.perf_counter()
        note = ""
        if options.app_decoder:
            self._tokenizer = self._open_tokenizer(model_dir, options.device)
            self._stop_ids = self._model_stop_ids(model_dir)
            budget = options.state_cache_bytes
            try:
                self._fast = AppDecoder(
                    model_dir,
                    options.device,
                    properties,
                    draft_vocab=options.draft_vocab,
                    special_ids=sorted(self._stop_ids),
                    cache_budget=automatic_bytes() if budget is None else budget,
                    mtp=use_mtp,
                    continuation=continuation_fits(weight_file_bytes(model_dir)),
                )
            except DecoderUnavailableError as exc:
                note = (
                    f"The app's decoder cannot run this model ({exc}), "
                    "so openvino-genai decodes it (no state kept between turns"
                    + (", no sampling with MTP)." if use_mtp else ").")
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
            self._stop_ids = frozenset(config_stop_ids(self._pipeline.get_generation_config()))
        load_s = time.perf_counter() - started
        self._think_start = self._single_token_id("<think>")
        self._think_end = self._single_token_id("</think>")
        self._message_start = self._single_token_id("<|im_start|>")
        self._vocab = self._fast_vocab(model_dir, options.cache_dir)
        self._guards = PromptGuards.for_model(model_dir, self._tokenizer)  # issue 19
        if self._fast is not None and use_mtp and not self._fast.has_mtp:
            use_mtp = False  # the decoder found no MTP IR it could load
        decoder: DecoderName = "app" if self._fast is not None else "genai"
        self.loaded = LoadedModel(
            model_dir,
            options.device,
            use_mtp,
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
            "MTP" if use_mtp else "plain",
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
        """Whether a plain-decoding request runs without loading anything first."""
        loaded = self.loaded
        if loaded is None:
            return False
        fast_plain = self._fast is not None and self._plain_on_fast
        return fast_plain or not loaded.mtp or self._plain is not None

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
        if not loaded.mtp and self._fast is None:
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
        return frozenset(i for i in config_stop_ids(config) if i >= 0)

    def render_prompt(
        self,
        messages: Sequence[Message],
        *,
        thinking: bool = False,
        tools_json: str = "",
        continue_final: bool = False,
    ) -> str:
        """The conversation in the model's own chat template, ending with the assistant turn;
        `tools_json`: the tools on offer (GenerationSettings.tools_json). `continue_final`: the
        last message is an answer begun by the caller, continued (the generation prompt
        without thinking, then its text, escaped like any typed text)."""
        self._require_loaded()
        last = messages[-1] if messages else None
        if continue_final and last is not None and last.role == "assistant":
            if last.tool_calls or last.images:
                raise EngineError("A continued answer is text only.", code="BAD_CONVERSATION")
            head = self.render_prompt(messages[:-1], tools_json=tools_json)
            try:
                check_text(last.content, "The assistant message")
            except UserFacingError as exc:
                raise EngineError(exc.message, exc.fix, code=exc.code) from None
            assert self._guards is not None
            return head + self._guards.escape(last.content)
        if not ends_with_prompt(messages):
            raise EngineError(
                "The conversation must end with a user message (or tool results).",
                code="BAD_CONVERSATION",
            )
        return self._render(messages, thinking, tools_json, generation_prompt=True)

    def _render(
        self,
        messages: Sequence[Message],
        thinking: bool,
        tools_json: str = "",
        *,
        generation_prompt: bool,
    ) -> str:
        tokenizer = self._require_loaded()[1]
        guards = self._guards
        assert guards is not None
        for message in messages:
            what = (
                "The system prompt" if message.role == "system" else f"The {message.role} message"
            )
            try:
                check_text(message.content, what)  # before the native JSON layer sees it
            except UserFacingError as exc:
                raise EngineError(exc.message, exc.fix, code=exc.code) from None
        # Typed text (and tool text) never becomes a control token.
        history = template_history(messages, guards.escape)
        tools = template_tools(tools_json, guards.escape)
        try:
            guards.check_template(history, thinking, tools)  # bounded, before the native call
        except UserFacingError as exc:
            raise EngineError(exc.message, exc.fix, code=exc.code) from exc
        try:
            rendered: str = tokenizer.apply_chat_template(
                history,
                add_generation_prompt=generation_prompt,
                tools=tools,
                extra_context={"enable_thinking": thinking},
            )
        except Exception as exc:
            raise EngineError(
                "The model's chat template could not render this conversation: "
                + native_error_line(exc),
                "Re-export the model so its tokenizer carries a chat template.",
                code="CHAT_TEMPLATE",
            ) from exc
        return rendered

    def _next_turn_prompt(
        self, messages: Sequence[Message], thinking: bool, tools_json: str = ""
    ) -> str | None:
        """How the next turn's prompt will begin: this conversation with an answer added, as
        the template renders earlier turns (Qwen3.5 drops their thinking block, so the next
        prompt leaves this one's generation prompt at the assistant header). None when it
        cannot be rendered (the turn then keeps its state at the prompt's end only)."""
        try:
            return self._render(
                [*messages, Message("assistant", "X")],
                thinking,
                tools_json,
                generation_prompt=False,
            )
        except EngineError as exc:
            log.debug("next turn's prompt not rendered: %s", exc.message)
            return None

    def generate(
        self, messages: Sequence[Message], settings: GenerationSettings | None = None
    ) -> Generation:
        settings = settings or GenerationSettings()
        settings.check()
        self._require_loaded()
        if settings.continue_final:  # the answer goes on: no thinking, its text as it comes
            settings = replace(settings, thinking=False, raw_text=True)
        messages, left_out, rendered = self._fit_context(messages, settings)
        prompt, ids = rendered or self._encoded(
            self.render_prompt(
                messages,
                thinking=settings.thinking,
                tools_json=settings.tools_json,
                continue_final=settings.continue_final,
            )
        )
        self._check_context(ids)
        log_conversation("prompt", prompt)  # only with debug logging on
        images = [_load_image(path) for m in messages for path in m.images]
        next_prompt = None
        if self._fast is not None and not images and not settings.continue_final:
            next_prompt = self._next_turn_prompt(messages, settings.thinking, settings.tools_json)
        generation = self._start(prompt, settings, images, prompt_ids=ids, next_prompt=next_prompt)
        generation.left_out_messages = left_out
        return generation

    def _fit_context(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> tuple[Sequence[Message], int, Encoded | None]:
        """The conversation under `settings.context_overflow` (core.engine.context_fit), with
        its prompt and ids when fitting it rendered them."""
        limit = self._guards.context_length if self._guards is not None else None
        if limit is None or settings.context_overflow == "stop" or settings.continue_final:
            return messages, 0, None

        def encode(kept: Sequence[Message]) -> Encoded:
            return self._encoded(
                self.render_prompt(kept, thinking=settings.thinking, tools_json=settings.tools_json)
            )

        room = min(settings.max_new_tokens, limit // 4)
        return fit_context(messages, settings.context_overflow, limit - room, encode)

    def generate_raw(self, prompt: str, settings: GenerationSettings | None = None) -> Generation:
        """Generate from an already rendered prompt (validation and benchmarks use this)."""
        settings = settings or GenerationSettings()
        settings.check()
        self._require_loaded()
        ids = self._encoded(prompt)[1]
        self._check_context(ids)
        return self._start(prompt, settings, [], prompt_ids=ids)

    def _start(
        self,
        prompt: str,
        settings: GenerationSettings,
        images: list[Any],
        *,
        prompt_ids: list[int] | None = None,
        next_prompt: str | None = None,
    ) -> Generation:
        """Route a turn: text turns to the app's decoder (any method, greedy, sampled or
        constrained, with the conversation's kept state), turns with images (and every turn
        when the app's decoder cannot run the model) to openvino-genai's pipelines."""
        loaded = self._require_loaded()[0]
        method = settings.method
        if method.uses_mtp_head and not loaded.mtp:
            method = DecodingMethod.plain(method.sampling).with_constraint(method.constraint)
        # Plain turns go to openvino-genai's plain pipeline only when asked to
        # (LoadOptions.plain_decoder "genai": the benchmark's fastest-plain-path row).
        genai_plain = method.is_plain and method.constraint is None and not self._plain_on_fast
        fast = self._fast is not None and not images and not genai_plain
        vocab = self._fast.vocab_size if fast and self._fast is not None else None
        outside = [t for t, _ in method.sampling.logit_bias if vocab is not None and t >= vocab]
        if outside:
            raise EngineError(
                f"logit_bias names token {outside[0]}, outside this model's vocabulary "
                f"(0 to {(vocab or 1) - 1}).",
                "Send token ids of this model's tokenizer.",
                code="BAD_LOGIT_BIAS",
            )
        if not fast and settings.logprobs is not None:
            raise EngineError(
                "Log-probabilities come from the app's decoder, which does not run "
                + ("turns with images." if images else "this turn's decoding path."),
                "Ask without logprobs.",
                code="LOGPROBS_UNSUPPORTED",
            )
        if not fast:
            method = self._genai_method(
                method, images=bool(images), auto=settings.within_turn is not None
            )
        if method != settings.method:
            settings = replace(settings, method=method)
        stable_prefix = None
        if fast and next_prompt is not None and prompt_ids is not None:
            stable_prefix = common_prefix_length(
                prompt_ids, [int(i) for i in encode_ids(self._tokenizer, next_prompt)]
            )
        message_starts: tuple[int, ...] = ()
        if fast and prompt_ids is not None and self._message_start is not None:
            start = self._message_start
            message_starts = tuple(i for i, token in enumerate(prompt_ids) if token == start)
        with self._lock:
            if self._active is not None:
                raise EngineError("A generation is already running.", "Stop it first.", code="BUSY")
            config = pipeline = None
            if not fast:
                pipeline, config = self._genai_turn(settings)
            resources = TurnResources(
                loaded,
                self._tokenizer,
                self._vocab,
                self._think_start,
                self._think_end,
                self._stop_ids,
                pipeline,
                self._fast if fast else None,
                prompt_ids if fast else None,
                stable_prefix,
                message_starts,
                self._open_plain,
                self._generation_finished,
            )
            generation = Generation(resources, prompt, config, settings, images)
            self._active = generation
        return generation

    def _genai_method(
        self, method: DecodingMethod, *, images: bool, auto: bool = False
    ) -> DecodingMethod:
        """What openvino-genai can run of `method` (image turns; models the app's decoder
        cannot run): its MTP and prompt lookup decode greedily, and it enforces no
        constraint or logit bias here. `auto`: Auto chose the method (a sampled MTP turn then
        samples plain, as an image turn does, instead of being refused)."""
        if method.sampling.logit_bias:
            raise EngineError(
                "A logit bias is applied by the app's decoder, which does not run "
                + ("turns with images." if images else "this model."),
                "Send the request without logit_bias.",
                code="LOGIT_BIAS_UNSUPPORTED",
            )
        if method.constraint is not None and method.constraint.lazy:
            # tool_choice auto's grammar asks for no answer: without it the calls are parsed.
            log.info("the tool-call grammar is not enforced on this turn (openvino-genai)")
            method = method.with_constraint(None)
        if method.constraint is not None:
            raise EngineError(
                "Structured output (a JSON schema or grammar) is not available for "
                + (
                    "turns with images."
                    if images
                    else "this model: the app's decoder cannot run it."
                ),
                "Send the request without the image, or without response_format.",
                code="CONSTRAINT_UNSUPPORTED",
            )
        if method.kind == "lookup" and images:
            # The runtime expands an image into hundreds of prompt tokens the app cannot see,
            # so its drafts could not be counted: such turns decode as if lookup were off.
            log.info("prompt lookup is not used for a turn with images")
            loaded = self.loaded
            mtp = loaded is not None and loaded.mtp
            method = (
                DecodingMethod.mtp(1, method.sampling)
                if mtp
                else DecodingMethod.plain(method.sampling)
            )
        if method.uses_mtp_head and not method.sampling.greedy:
            # openvino-genai 2026.4: "MTP streaming only supports batch size=1 with greedy
            # decoding" (mtp_strategy.cpp); image turns sample without drafts.
            if not (images or auto):
                raise EngineError(
                    "Sampling with MTP needs the app's decoder, which cannot run this model; "
                    "openvino-genai's MTP decodes greedily.",
                    "Set temperature to 0, or turn MTP off to sample.",
                    code="MTP_NEEDS_GREEDY",
                )
            log.info("this turn samples with plain decoding (openvino-genai's MTP is greedy)")
            method = DecodingMethod.plain(method.sampling)  # and a fresh seed, below
        if method.kind == "lookup" and not method.sampling.greedy:
            raise EngineError(
                "Prompt lookup samples only on the app's decoder, which cannot run this model.",
                "Set temperature to 0, or choose plain decoding to sample.",
                code="LOOKUP_NEEDS_GREEDY",
            )
        if not method.sampling.greedy and method.sampling.seed is None:
            # openvino-genai's default seed is fixed: every answer would be the same.
            method = method.with_sampling(replace(method.sampling, seed=fresh_seed()))
        return method

    def _genai_turn(self, settings: GenerationSettings) -> tuple[Any, Any]:
        """The openvino-genai pipeline and generation config for a turn it runs."""
        method = settings.method
        if method.kind == "lookup":
            pipeline = self._ensure_lookup()
            config = self._generation_config(settings, pipeline, mtp=False)
            config.num_assistant_tokens = method.drafts
            config.max_ngram_size = method.ngram
            config.stop_strings = set()  # applied by the app (core.decoding.prompt_lookup)
            return pipeline, config
        loaded = self.loaded
        use_mtp = loaded is not None and loaded.mtp and method.uses_mtp_head
        pipeline = self._ensure_mtp_pipeline() if use_mtp else self._ensure_plain()
        return pipeline, self._generation_config(settings, pipeline, mtp=use_mtp)

    def _open_plain(
        self, settings: GenerationSettings
    ) -> tuple[Any, openvino_genai.GenerationConfig]:
        """The plain pipeline and its config for a within-turn switch (core.engine.generation)."""
        plain = self._ensure_plain()
        return plain, self._generation_config(settings, plain, mtp=False)

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
        sampling = settings.method.sampling
        config.do_sample = not sampling.greedy
        if not sampling.greedy:
            config.temperature = sampling.temperature
            config.top_p = sampling.top_p
            config.top_k = sampling.top_k or ALL_TOKENS
            config.min_p = sampling.min_p
            if sampling.seed is not None:
                config.rng_seed = sampling.seed
        config.repetition_penalty = sampling.repetition_penalty
        config.presence_penalty = sampling.presence_penalty
        config.frequency_penalty = sampling.frequency_penalty
        config.ignore_eos = settings.ignore_eos
        if settings.stop_strings:
            config.stop_strings = set(settings.stop_strings)
            config.include_stop_str_in_output = False
        if mtp:
            config.num_assistant_tokens = settings.method.drafts
        return config

    def require_loaded(self) -> LoadedModel:
        """The loaded model; EngineError NOT_LOADED when there is none."""
        return self._require_loaded()[0]

    def _require_loaded(self) -> tuple[LoadedModel, Any]:
        if self.loaded is None or self._tokenizer is None:
            raise EngineError("No model is loaded.", "Load a model first.", code="NOT_LOADED")
        return self.loaded, self._tokenizer

    def _encoded(self, prompt: str) -> Encoded:
        return prompt, [int(i) for i in encode_ids(self._tokenizer, prompt)]

    def _check_context(self, ids: list[int]) -> None:
        """EngineError when a prompt of these token ids does not fit the model's context."""
        guards = self._guards
        if guards is not None and guards.context_length is not None:
            try:
                check_fits(len(ids), guards.context_length)
            except UserFacingError as exc:
                raise EngineError(exc.message, exc.fix, code=exc.code) from exc

    def drop_states(self) -> None:
        """Forget the conversation states kept between turns (the next turn prefills all of
        its prompt; benchmarks measure cold prefills this way)."""
        if self._fast is not None:
            self._fast.drop_states()

    def state_cache_report(self) -> CacheReport | None:
        """What the app's decoder keeps of conversations (None: no app decoder loaded)."""
        return self._fast.cache_report() if self._fast is not None else None

    def _fast_vocab(self, model_dir: Path, cache_dir: Path | None = None) -> ByteLevelVocab | None:
        """The model's byte-level vocabulary for streaming text, when it decodes exactly like
        the runtime's detokenizer (checked here); None keeps the detokenizer."""
        started = time.perf_counter()
        vocab = ByteLevelVocab.from_tokenizer_json(model_dir / "tokenizer.json")
        if vocab is None:
            return None
        tokenizer = self._tokenizer
        samples = [[int(i) for i in encode_ids(tokenizer, text)] for text in VOCAB_CHECK_TEXTS]
        if not vocab_agrees(
            vocab, lambda ids: str(tokenizer.decode(ids)), samples
        ) or not proven_equal(vocab, tokenizer, model_dir, cache_dir):
            log.warning("%s: tokenizer.json decodes differently; using the detokenizer", model_dir)
            return None
        log.info("byte-level vocabulary ready in %.2f s", time.perf_counter() - started)
        return vocab

    def _single_token_id(self, text: str) -> int | None:
        ids = encode_ids(self._tokenizer, text)
        return int(ids[0]) if len(ids) == 1 else None

    @staticmethod
    def _load_error(model_dir: Path, device: str, exc: Exception) -> EngineError:
        detail = native_error_line(exc)
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


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


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


def _check_device(device: str) -> None:
    from qwen_mtp_desktop.core.system.devices import available_devices, missing_device_error

    try:
        found = available_devices()
    except Exception:  # no device list: let the runtime report it
        return
    problem = missing_device_error(device, found)
    if problem is not None:
        raise EngineError(problem.message, problem.fix, code=problem.code)
