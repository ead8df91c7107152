"""Builds a tiny, real Qwen3.5 (+MTP) checkpoint offline, for tests and the bundled demo.

The checkpoint uses the genuine transformers classes (model_type `qwen3_5`, or `qwen3_5_moe`),
a byte-level BPE tokenizer trained here on generated text, a Qwen3.5-style ChatML template with
the `enable_thinking` switch, a Qwen3VLProcessor and `mtp.*` weights in model.safetensors, so
`optimum-cli export openvino --task image-text-to-text` exports it with openvino_mtp_model.
With `train_steps > 0` the model and its MTP head are trained jointly to count and repeat
phrases, which gives real draft acceptance in MTP speculative decoding. A `Recipe` says what
is trained: the demo's counting chats (`DEMO`), or tool-calling chats (`TOOLS`, the tool
model the tests call tools with; devtools.tool_corpus); both go through the same builder.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.devtools import corpus, tool_corpus

# Bump whenever the produced files would change (dims, data, template, training recipe...).
BUILDER_VERSION = "2"

HIDDEN_SIZE = 64
#: The demo's layers: Qwen3.5's own pattern, 3 linear-attention (Gated DeltaNet) + 1 full.
DEMO_LAYERS = ("linear_attention",) * 3 + ("full_attention",)
VOCAB_MULTIPLE = 64  # the embedding table is padded like Qwen's (vocab_size > tokenizer size)
BPE_VOCAB_SIZE = 1200  # upper bound; the generated corpus yields ~750 tokens
# One thread: the same reduction order on every machine, and these tiny ops gain nothing from two
# (two OpenMP threads ran 5-10x slower whenever another process shared the cores).
BUILD_THREADS = 1
# Measured with seed 0 (self-check on 8 held-out chats; `generate` on the demo prompts):
#   800 steps: 5/8 exact, draft agreement 0.97; stops early ("Count from 1 to 20." -> 1..15);
#  1600 steps: 8/8 exact, agreement 1.00; counts ranges up to 20 numbers exactly, repeats;
#  2400 steps: the same answers as 1600 (no gain for 50 % more time).
# 1600 steps take about 3.5 min on one uncontended core.
RECOMMENDED_DEMO_STEPS = 1600

# Qwen2's pre-tokenizer regex (digits are split one by one, exactly like the real Qwen models).
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen marks <think>/</think> as non-special so decoding with skip_special_tokens keeps them.
NON_SPECIAL_TOKENS = frozenset({corpus.THINK_OPEN, corpus.THINK_CLOSE})


@dataclass(frozen=True)
class Recipe:
    """What a build trains and how: the tokenizer's text, the training chats, the held-out
    chats the self-check decodes, and the training shape."""

    name: str
    #: Bump when this recipe's files would change; recorded in the build record.
    version: str
    tokenizer_texts: Callable[[], list[str]]
    bpe_vocab_size: int
    #: seed -> the endless training stream; seed -> the self-check's chats.
    samples: Callable[[int], Iterator[corpus.Sample]]
    check_samples: Callable[[int], Sequence[corpus.Sample]]
    recommended_steps: int
    #: Training's shape; the defaults are the demo's (and train_jointly's).
    max_seq_len: int = 112
    batch_size: int = 12
    lr: float = 3e-3
    #: The self-check's chats and greedy answers -> what is wrong (the build fails when any).
    judge: Callable[[Sequence[corpus.Sample], Sequence[str]], list[str]] | None = None
    #: Words whose tokens weigh more in the loss (what the model must copy).
    emphasis: Callable[[], list[str]] | None = None
    #: Batches drawn together and sorted by length (1: as drawn).
    length_pool: int = 1
    layer_types: tuple[str, ...] = DEMO_LAYERS
    #: The embeddings' (tied with the output layer's) initial scale; None: the config's 0.02.
    embedding_std: float | None = None


def _demo_check_samples(seed: int) -> list[corpus.ChatSample]:
    return corpus.generate_samples(8, seed + 10_000)


DEMO = Recipe(
    name="demo",
    version=BUILDER_VERSION,
    tokenizer_texts=corpus.tokenizer_corpus,
    bpe_vocab_size=BPE_VOCAB_SIZE,
    samples=corpus.iter_samples,
    check_samples=_demo_check_samples,
    recommended_steps=RECOMMENDED_DEMO_STEPS,
)

#: Held-out chats the tool model's build decodes; every one must be answered right.
TOOL_CHECK_SAMPLES = 24


def _tool_check_samples(seed: int) -> list[tool_corpus.ToolSample]:
    return tool_corpus.held_out_samples(TOOL_CHECK_SAMPLES, seed + 10_000)


TOOLS = Recipe(
    name="tools",
    version="tools-1",
    tokenizer_texts=tool_corpus.tool_tokenizer_corpus,
    bpe_vocab_size=2000,
    samples=tool_corpus.iter_tool_samples,
    check_samples=_tool_check_samples,
    recommended_steps=1300,
    max_seq_len=640,  # the longest chats (two earlier exchanges) are about 620 tokens
    batch_size=8,
    judge=tool_corpus.judge_answers,
    emphasis=tool_corpus.value_words,
    length_pool=8,
    # Two full-attention layers and larger initial embeddings: the model must copy values
    # from a question into its call and from a result into its answer. Measured on short
    # chats (seed 0, 12 held-out results to answer): Qwen3.5's 3:1 pattern 9/12 after 1,200
    # steps (a condition wrong in each miss), 0/12 after 800 with embeddings at 0.1; 1:1
    # 3/12 after 800; 1:1 with embeddings drawn at 0.1 instead of 0.02 12/12 after 800.
    layer_types=("linear_attention", "full_attention") * 2,
    embedding_std=0.1,
)


@dataclass(frozen=True)
class BuildResult:
    path: Path
    moe: bool
    seed: int
    train_steps: int
    parameters: int
    mtp_parameters: int
    final_loss: float | None
    final_mtp_loss: float | None
    seconds: float


def build_checkpoint(
    out_dir: Path,
    *,
    moe: bool = False,
    train_steps: int = 0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    recipe: Recipe = DEMO,
) -> BuildResult:
    """Builds the checkpoint into `out_dir` (must not exist, or be empty); atomic on success.
    A trained build whose recipe judges its self-check wrong raises SelfCheckError (nothing
    is left behind)."""
    out_dir = Path(out_dir)
    if train_steps < 0:
        raise ValueError(f"train_steps must be >= 0, got {train_steps}")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"{out_dir} already exists and is not an empty folder; choose a new one")
    report = progress or (lambda _message: None)
    started = time.perf_counter()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # A sibling temp folder keeps the final rename on one filesystem (atomic).
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    try:
        with _deterministic_torch(seed):
            stats = _build_into(
                work, moe=moe, train_steps=train_steps, seed=seed, report=report, recipe=recipe
            )
        work.chmod(0o755)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above); os.replace cannot overwrite it on Windows
        work.replace(out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    seconds = time.perf_counter() - started
    report(f"built {out_dir} in {seconds:.1f} s")
    return BuildResult(
        path=out_dir,
        moe=moe,
        seed=seed,
        train_steps=train_steps,
        parameters=stats["parameters"],
        mtp_parameters=stats["mtp_parameters"],
        final_loss=stats["final_loss"],
        final_mtp_loss=stats["final_mtp_loss"],
        seconds=seconds,
    )


@contextmanager
def _deterministic_torch(seed: int) -> Iterator[None]:
    """Seeds torch, pins the thread count and enables deterministic kernels; restores after."""
    import torch

    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(BUILD_THREADS)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


class SelfCheckError(RuntimeError):
    """The trained model answered held-out chats wrongly (the message lists how)."""


def _build_into(
    folder: Path,
    *,
    moe: bool,
    train_steps: int,
    seed: int,
    report: Callable[[str], None],
    recipe: Recipe,
) -> dict[str, Any]:
    import torch

    from qwen_mtp_desktop.devtools.training import MTPHead, self_check, train_jointly

    tokenizer = build_tokenizer(recipe.tokenizer_texts(), recipe.bpe_vocab_size)
    report(f"tokenizer: {len(tokenizer)} tokens (BPE trained on generated text)")
    config = make_config(tokenizer, moe=moe, layer_types=recipe.layer_types)
    torch.manual_seed(seed)
    model = _model_class(moe)(config)
    if recipe.embedding_std is not None:
        with torch.no_grad():
            model.model.language_model.embed_tokens.weight.normal_(0.0, recipe.embedding_std)
    model.eval()
    head = MTPHead(config.text_config, moe=moe)
    parameters = model.num_parameters()
    mtp_parameters = sum(p.numel() for p in head.parameters())
    kind = "qwen3_5_moe" if moe else "qwen3_5"
    report(f"model: {kind}, {parameters:,} parameters + {mtp_parameters:,} MTP")

    final_loss: float | None = None
    final_mtp_loss: float | None = None
    check_json: dict[str, Any] | None = None
    if train_steps > 0:
        trained = time.perf_counter()
        stats = train_jointly(
            model,
            head,
            tokenizer,
            steps=train_steps,
            seed=seed,
            progress=report,
            samples=recipe.samples(seed),
            emphasis=_word_tokens(tokenizer, recipe.emphasis()) if recipe.emphasis else (),
            pool=recipe.length_pool,
            batch_size=recipe.batch_size,
            lr=recipe.lr,
            max_seq_len=recipe.max_seq_len,
        )
        report(f"trained {train_steps} steps in {time.perf_counter() - trained:.0f} s")
        final_loss, final_mtp_loss = stats.loss, stats.mtp_loss
        check_samples = recipe.check_samples(seed)
        check = self_check(model, head, tokenizer, check_samples)
        report(
            f"self-check: {check.answers_ok}/{check.answers_total} exact answers, "
            f"MTP draft agreement {check.mtp_agreement:.2f}"
        )
        check_json = {
            "exact_answers": check.answers_ok,
            "answers": check.answers_total,
            "mtp_agreement": round(check.mtp_agreement, 4),
        }
        if recipe.judge is not None:
            problems = recipe.judge(check_samples, check.texts)
            for problem in problems:
                report(f"self-check: {problem}")
            if problems:
                raise SelfCheckError(
                    f"{len(problems)} of {len(check_samples)} held-out chats answered wrongly "
                    f"(first: {problems[0]})"
                )
            check_json["judged_right"] = len(check_samples)

    _save(folder, model, head, tokenizer)
    # The demo's record keeps its original keys, so rebuilding it gives the committed bytes.
    named = {} if recipe is DEMO else {"recipe": recipe.name}
    _save_provenance(
        folder,
        {
            **named,
            "builder_version": recipe.version,
            "kind": kind,
            "seed": seed,
            "train_steps": train_steps,
            "final_loss": None if final_loss is None else round(final_loss, 4),
            "final_mtp_loss": None if final_mtp_loss is None else round(final_mtp_loss, 4),
            "self_check": check_json,
            "torch": torch.__version__,
        },
    )
    report(f"saved checkpoint files in {folder.name}")
    return {
        "parameters": parameters,
        "mtp_parameters": mtp_parameters,
        "final_loss": final_loss,
        "final_mtp_loss": final_mtp_loss,
    }


def _word_tokens(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """The ids of tokens that are one of `words` whole (with or without a space before)."""
    wanted = set(words)
    ids = {
        token
        for word in wanted
        for variant in (word, f" {word}")
        for token in tokenizer.encode(variant, add_special_tokens=False)
    }
    return sorted(token for token in ids if tokenizer.decode([token]).strip() in wanted)


def build_tokenizer(texts: Sequence[str] | None = None, vocab_size: int = BPE_VOCAB_SIZE) -> Any:
    """Byte-level BPE on generated text (the demo's corpus unless `texts`), wrapped in
    Qwen2TokenizerFast with ChatML."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import AddedToken, Qwen2TokenizerFast

    # Same normalizer / pre-tokenizer as Qwen2TokenizerFast rebuilds on load, so the merges
    # learned here are the ones applied at runtime.
    bpe = Tokenizer(BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix=""))
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    bpe.train_from_iterator(corpus.tokenizer_corpus() if texts is None else texts, trainer=trainer)
    model_json = _bpe_model_json(bpe)
    tokenizer = Qwen2TokenizerFast(
        vocab=model_json["vocab"],
        merges=[
            tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model_json["merges"]
        ],
        unk_token=None,
        bos_token=None,
        eos_token=None,
        pad_token=None,
        model_max_length=32768,
    )
    # Added after the BPE vocabulary, in a fixed order, like Qwen's <|endoftext|> ... </think>.
    for token in corpus.SPECIAL_TOKENS:
        special = token not in NON_SPECIAL_TOKENS
        tokenizer.add_tokens([AddedToken(token, special=special, normalized=False)], special)
    tokenizer.eos_token = corpus.IM_END
    tokenizer.pad_token = corpus.ENDOFTEXT
    tokenizer.chat_template = corpus.CHAT_TEMPLATE
    return tokenizer


def _bpe_model_json(bpe: Any) -> dict[str, Any]:
    import json

    data: dict[str, Any] = json.loads(bpe.to_str())["model"]
    return data


def make_config(tokenizer: Any, *, moe: bool, layer_types: Sequence[str] = DEMO_LAYERS) -> Any:
    """Tiny Qwen3.5 geometry (see RUNTIME-NOTES): 4 layers, by default 3 linear-attention + 1
    full-attention."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in corpus.SPECIAL_TOKENS}
    vocab_size = -(-len(tokenizer) // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    text: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN_SIZE,
        "num_hidden_layers": len(layer_types),
        "layer_types": list(layer_types),
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_conv_kernel_dim": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [2, 1, 1],
            "partial_rotary_factor": 0.25,
            "rope_theta": 10_000_000.0,
            "rope_type": "default",
        },
        "mtp_num_hidden_layers": 1,  # the exporter supports exactly one MTP layer
        "eos_token_id": ids[corpus.IM_END],
        "pad_token_id": ids[corpus.ENDOFTEXT],
    }
    if moe:
        text |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
        }
    else:
        text["intermediate_size"] = 128
    vision = {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": HIDDEN_SIZE,
        "num_position_embeddings": 256,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
    }
    if moe:
        from transformers import Qwen3_5MoeConfig as ConfigClass
    else:
        from transformers import Qwen3_5Config as ConfigClass
    return ConfigClass(
        text_config=text,
        vision_config=vision,
        tie_word_embeddings=True,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )


def _model_class(moe: bool) -> Any:
    if moe:
        from transformers import Qwen3_5MoeForConditionalGeneration

        return Qwen3_5MoeForConditionalGeneration
    from transformers import Qwen3_5ForConditionalGeneration

    return Qwen3_5ForConditionalGeneration


def make_processor(tokenizer: Any) -> Any:
    """Qwen3VLProcessor with Qwen3.5's patch 16 / temporal 2 / merge 2 image and video settings."""
    from transformers import Qwen2VLImageProcessorFast, Qwen3VLProcessor, Qwen3VLVideoProcessor

    common: dict[str, Any] = {
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    # Pixel budgets are smaller than Qwen3.5's so images stay cheap for a tiny model.
    image_processor = Qwen2VLImageProcessorFast(
        size={"shortest_edge": 64 * 64, "longest_edge": 512 * 512}, **common
    )
    video_processor = Qwen3VLVideoProcessor(
        size={"shortest_edge": 64 * 64, "longest_edge": 512 * 512 * 2}, **common
    )
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=corpus.CHAT_TEMPLATE,
    )


#: Written next to the checkpoint: how it was made, so a stale bundled demo model is detectable.
PROVENANCE_FILE = "qwen_mtp_build.json"


def _save_provenance(folder: Path, data: dict[str, Any]) -> None:
    import json

    # No timestamps or paths: two builds with the same arguments must be byte-identical.
    path = folder / PROVENANCE_FILE
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    path.chmod(0o644)


def read_provenance(folder: Path) -> dict[str, Any] | None:
    """The build record of a checkpoint made by this builder, or None."""
    import json

    try:
        data = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _save(folder: Path, model: Any, head: Any, tokenizer: Any) -> None:
    from safetensors.torch import load_file, save_file
    from transformers import GenerationConfig

    im_end = tokenizer.convert_tokens_to_ids(corpus.IM_END)
    endoftext = tokenizer.convert_tokens_to_ids(corpus.ENDOFTEXT)
    # Greedy by default: the demo should count and repeat the same way every time.
    model.generation_config = GenerationConfig(
        eos_token_id=[im_end, endoftext], pad_token_id=endoftext, do_sample=False
    )
    model.save_pretrained(folder)
    weights_path = folder / "model.safetensors"
    tensors = load_file(weights_path)
    # transformers drops `mtp.*` on load; the exporter reads them straight from this file.
    tensors.update(head.checkpoint_tensors())
    save_file(tensors, weights_path, metadata={"format": "pt"})
    processor = make_processor(tokenizer)
    processor.save_pretrained(folder)
    # Hub Qwen3.5 repos also ship these two files; openvino_genai reads preprocessor_config.json.
    processor.image_processor.save_pretrained(folder)
    processor.video_processor.save_pretrained(folder)
    for path in folder.iterdir():
        path.chmod(0o644)  # safetensors / mkdtemp leave owner-only modes
