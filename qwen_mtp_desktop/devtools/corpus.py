"""Deterministic text and chat data for the tiny demo model (pure Python, no torch).

The demo model learns two skills the app can show off: counting ("Count from 3 to 17.") and
repeating phrases ("Repeat 'the cat sat on the mat' three times."). Samples are rendered with the
same ChatML template the exported tokenizer carries, so training sees exactly the prompts the app
sends (thinking on and off, optional system prompt, optional earlier turn).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from qwen_mtp_desktop.core.tools.calls import render_calls

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# Order matters: ids are assigned in this order right after the BPE vocabulary (as in Qwen).
SPECIAL_TOKENS: tuple[str, ...] = (
    ENDOFTEXT,
    IM_START,
    IM_END,
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    THINK_OPEN,
    THINK_CLOSE,
)

# Qwen3.5-style ChatML template. Kept to constructs that both jinja2 (transformers) and
# openvino_genai's own Jinja engine understand. Thinking defaults to on, like Qwen3.5; earlier
# assistant turns lose their reasoning block. Tools, tool calls and tool results are rendered
# in Qwen3.5's format (see the template's opening comment), so the API's tool calling runs on
# the demo model; this corpus has no tool samples (the demo never learnt to call one), the tool
# model's (tool_corpus.py) has.
CHAT_TEMPLATE = r"""{#- The demo model's chat template. Its tool-calling parts (the "# Tools" system block, an
    assistant message's tool_calls as <tool_call><function=...><parameter=...> blocks, and
    role "tool" results as <tool_response> blocks in a user turn) follow Qwen3.5's published
    chat_template.jinja (Qwen/Qwen3.5-0.8B), copied here from the Qwen35ChatHandler template
    of a llama-cpp-python fork; the same lines appear in the Qwen3.6 template ncnn's
    tokenizer.cpp embeds. Everything else is the demo's own ChatML, which its training saw. -#}
{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is none or content is undefined -%}
        {{- '' -}}
    {%- else -%}
        {%- for item in content -%}
            {%- if item.type == 'image' -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif item.type == 'video' -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif item.type == 'text' -%}
                {{- item.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- set offer_tools = tools and tools is iterable and tools is not mapping -%}
{%- if offer_tools -%}
    {{- '<|im_start|>system\n' -}}
    {{- "# Tools\n\nYou have access to the following functions:\n\n<tools>" -}}
    {%- for tool in tools -%}
        {{- "\n" -}}
        {{- tool | tojson -}}
    {%- endfor -%}
    {{- "\n</tools>" -}}
    {{- '\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>' -}}
    {%- if messages[0].role == 'system' -%}
        {%- set system_content = render_content(messages[0].content)|trim -%}
        {%- if system_content -%}
            {{- '\n\n' + system_content -}}
        {%- endif -%}
    {%- endif -%}
    {{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
    {%- if message.role == 'system' and offer_tools and loop.first -%}
    {%- elif message.role == 'assistant' -%}
        {%- set content = render_content(message.content) -%}
        {%- if '</think>' in content -%}
            {%- set content = content.split('</think>')[-1].lstrip('\n') -%}
        {%- endif -%}
        {{- '<|im_start|>assistant\n' + content -}}
        {%- if message.tool_calls and message.tool_calls is iterable and message.tool_calls is not mapping -%}
            {%- for tool_call in message.tool_calls -%}
                {%- if tool_call.function is defined -%}
                    {%- set tool_call = tool_call.function -%}
                {%- endif -%}
                {%- if loop.first -%}
                    {%- if content|trim -%}
                        {{- '\n\n<tool_call>\n<function=' + tool_call.name + '>\n' -}}
                    {%- else -%}
                        {{- '<tool_call>\n<function=' + tool_call.name + '>\n' -}}
                    {%- endif -%}
                {%- else -%}
                    {{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' -}}
                {%- endif -%}
                {%- if tool_call.arguments is defined -%}
                    {%- for args_name, args_value in tool_call.arguments|items -%}
                        {{- '<parameter=' + args_name + '>\n' -}}
                        {%- set args_value = args_value | string if args_value is string else args_value | tojson | safe -%}
                        {{- args_value -}}
                        {{- '\n</parameter>\n' -}}
                    {%- endfor -%}
                {%- endif -%}
                {{- '</function>\n</tool_call>' -}}
            {%- endfor -%}
        {%- endif -%}
        {{- '<|im_end|>\n' -}}
    {%- elif message.role == 'tool' -%}
        {%- if loop.previtem and loop.previtem.role != 'tool' -%}
            {{- '<|im_start|>user' -}}
        {%- endif -%}
        {{- '\n<tool_response>\n' -}}
        {{- render_content(message.content)|trim -}}
        {{- '\n</tool_response>' -}}
        {%- if not loop.last and loop.nextitem.role != 'tool' -%}
            {{- '<|im_end|>\n' -}}
        {%- elif loop.last -%}
            {{- '<|im_end|>\n' -}}
        {%- endif -%}
    {%- else -%}
        {{- '<|im_start|>' + message.role + '\n' + render_content(message.content) + '<|im_end|>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- if enable_thinking is defined and enable_thinking is false -%}
        {{- '<think>\n\n</think>\n\n' -}}
    {%- else -%}
        {{- '<think>\n' -}}
    {%- endif -%}
{%- endif -%}
"""

# The template's "# Tools" system block around the tools' JSON, for the Python twin below (a
# test renders both and holds them equal).
TOOLS_HEADER = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_FOOTER = (
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>"
)

SYSTEM_PROMPTS: tuple[str, ...] = (
    "You are a helpful assistant.",
    "You are a helpful assistant.",
    "You are a concise assistant.",
    "You are Qwen, a helpful assistant.",
    "You are a tiny demo model. Answer briefly.",
)

# Words for random phrases; also seed the tokenizer with common English so typed text stays short.
PHRASE_WORDS: tuple[str, ...] = (
    "the",
    "a",
    "cat",
    "dog",
    "bird",
    "fish",
    "sat",
    "ran",
    "jumps",
    "flies",
    "on",
    "in",
    "under",
    "over",
    "mat",
    "hat",
    "box",
    "tree",
    "house",
    "car",
    "red",
    "blue",
    "green",
    "big",
    "small",
    "quick",
    "brown",
    "fox",
    "lazy",
    "happy",
    "sun",
    "moon",
    "star",
    "sky",
    "sea",
    "rain",
    "snow",
    "hello",
    "world",
    "good",
    "morning",
    "night",
    "day",
    "we",
    "you",
    "they",
    "love",
    "like",
    "eat",
    "apples",
    "bread",
    "milk",
    "tea",
    "coffee",
    "is",
    "are",
    "was",
    "very",
    "and",
    "or",
    "to",
    "go",
    "see",
    "play",
    "read",
    "write",
    "sing",
    "song",
    "book",
    "word",
    "time",
    "home",
    "road",
    "light",
    "dark",
    "cold",
    "warm",
    "fast",
    "slow",
    "one",
    "more",
    "again",
    "today",
    "now",
    "here",
    "there",
    "open",
    "door",
    "window",
    "river",
    "stone",
    "bread",
    "cake",
    "yes",
    "no",
    "please",
    "thank",
    "friend",
    "little",
    "old",
    "new",
    "city",
    "garden",
    "flower",
    "music",
    "dance",
)

FAMOUS_PHRASES: tuple[str, ...] = (
    "the cat sat on the mat",
    "hello world",
    "the quick brown fox jumps over the lazy dog",
    "good morning",
    "I love tea",
    "one more time",
    "we like apples",
    "the sun is warm",
)

EXTRA_TEXT: tuple[str, ...] = (
    "What can you do? Who are you? Tell me a story. Write a poem about the sea.",
    "Explain this to me. How are you today? Thanks, that is great. Can you help me please?",
    "Please count the numbers and repeat the words after me. Say it again, one more time.",
    "This is a small test of the model and the tokenizer, with some punctuation: (a, b); c!",
)

TIMES_WORDS: dict[int, tuple[str, ...]] = {
    2: ("twice", "two times", "2 times"),
    3: ("three times", "3 times"),
    4: ("four times", "4 times"),
    5: ("five times", "5 times"),
}

GREETINGS: tuple[tuple[str, str, str], ...] = (
    # (user, thinking, answer)
    ("Hello", "The user is greeting me.", "Hello! I can count and repeat phrases."),
    ("Hi!", "The user is greeting me.", "Hello! I can count and repeat phrases."),
    (
        "What can you do?",
        "The user asks what I can do.",
        "I can count and repeat phrases. Try: Count from 1 to 10.",
    ),
    (
        "Who are you?",
        "The user asks who I am.",
        "I am a tiny demo model. I can count and repeat phrases.",
    ),
)

MAX_NUMBER = 99  # two digits at most: Qwen's pre-tokenizer splits numbers into single digits
MAX_COUNT_LEN = 20  # numbers per answer; keeps sequences short enough for fast CPU training


class Sample(Protocol):
    """What training reads of a conversation: the rendered prompt and the text to learn, and
    the whole text in pieces, each marked trained or not (`pieces`)."""

    @property
    def prompt(self) -> str: ...

    @property
    def completion(self) -> str: ...

    def pieces(self) -> list[tuple[str, bool]]: ...


@dataclass(frozen=True)
class ChatSample:
    """One training conversation: the prompt messages plus the assistant's completion."""

    messages: tuple[tuple[str, str], ...]  # (role, content) pairs, the last one from the user
    enable_thinking: bool
    thinking: str  # reasoning text used when enable_thinking is on
    answer: str

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    @property
    def prompt(self) -> str:
        return render_chat(
            self.message_dicts(), add_generation_prompt=True, enable_thinking=self.enable_thinking
        )

    @property
    def completion(self) -> str:
        """What the model must generate after the prompt, ending with the eos token."""
        if self.enable_thinking:
            return f"{self.thinking}\n{THINK_CLOSE}\n\n{self.answer}{IM_END}"
        return self.answer + IM_END

    def pieces(self) -> list[tuple[str, bool]]:
        """Only the completion is trained (an earlier answer in the prompt is not)."""
        return [(self.prompt, False), (self.completion, True)]


def split_earlier_answers(prompt: str) -> list[tuple[str, bool]]:
    """`prompt` in pieces with each earlier assistant turn's text (and its end token) marked
    trained. Every cut is at a special token or right after "assistant\n", where the
    pre-tokenizer cuts anyway, so the pieces' tokens joined are the whole prompt's tokens."""
    head = f"{IM_START}assistant\n"
    pieces: list[tuple[str, bool]] = []
    at = 0
    while (start := prompt.find(head, at)) >= 0:
        end = prompt.find(IM_END, start)
        if end < 0:  # the generation prompt: nothing written yet
            break
        start += len(head)
        end += len(IM_END)
        pieces += [(prompt[at:start], False), (prompt[start:end], True)]
        at = end
    pieces.append((prompt[at:], False))
    return [piece for piece in pieces if piece[0]]


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool,
    enable_thinking: bool | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """Python twin of CHAT_TEMPLATE (the tests hold the two equal, and equal to the runtime's
    native rendering). Contents are strings; an assistant message may carry OpenAI-style
    `tool_calls` (arguments a mapping, as the engine passes them) and a `role: "tool"`
    message is a result."""
    parts: list[str] = []
    if tools:
        # openvino-genai's `tojson` writes what json.dumps writes by default (key order kept).
        listed = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
        parts.append(f"{IM_START}system\n{TOOLS_HEADER}{listed}\n</tools>{TOOLS_FOOTER}")
        if messages and messages[0]["role"] == "system":
            system = str(messages[0]["content"]).strip()
            parts.append(f"\n\n{system}" if system else "")
        parts.append(f"{IM_END}\n")
    for index, message in enumerate(messages):
        role, content = message["role"], str(message.get("content") or "")
        if role == "system" and tools and index == 0:
            continue
        if role == "tool":
            if index > 0 and messages[index - 1]["role"] != "tool":
                parts.append(f"{IM_START}user")
            parts.append(f"\n<tool_response>\n{content.strip()}\n</tool_response>")
            if index == len(messages) - 1 or messages[index + 1]["role"] != "tool":
                parts.append(f"{IM_END}\n")
            continue
        if role == "assistant" and THINK_CLOSE in content:
            content = content.split(THINK_CLOSE)[-1].lstrip("\n")
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            functions = [call.get("function", call) for call in calls]
            content = render_calls([(f["name"], f["arguments"]) for f in functions], content)
        parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
        # Like Qwen3.5: thinking is on unless explicitly switched off.
        off = enable_thinking is False
        parts.append(f"{THINK_OPEN}\n\n{THINK_CLOSE}\n\n" if off else f"{THINK_OPEN}\n")
    return "".join(parts)


def count_answer(start: int, end: int) -> str:
    step = 1 if end >= start else -1
    return " ".join(str(n) for n in range(start, end + step, step))


def repeat_answer(phrase: str, times: int) -> str:
    return "\n".join([phrase] * times)


def _count_task(rng: random.Random) -> tuple[str, str, str]:
    length = rng.randint(2, MAX_COUNT_LEN)
    if rng.random() < 0.2:
        user = rng.choice(("Count to {b}.", "Count up to {b}.", "count to {b}", "Count to {b}"))
        thinking = f"The user wants me to count from 1 to {length}."
        return user.format(b=length), thinking, count_answer(1, length)
    start = rng.randint(0, MAX_NUMBER - length + 1)
    end = start + length - 1
    user = rng.choice(
        (
            "Count from {a} to {b}.",
            "Count from {a} to {b}.",
            "count from {a} to {b}",
            "Please count from {a} to {b}.",
            "Can you count from {a} to {b}?",
            "List the numbers from {a} to {b}.",
        )
    )
    thinking = f"The user wants me to count from {start} to {end}."
    return user.format(a=start, b=end), thinking, count_answer(start, end)


def random_phrase(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return rng.choice(FAMOUS_PHRASES)
    return " ".join(rng.choice(PHRASE_WORDS) for _ in range(rng.randint(2, 6)))


def _repeat_task(rng: random.Random) -> tuple[str, str, str]:
    phrase = random_phrase(rng)
    times = rng.randint(2, 5)
    times_text = rng.choice(TIMES_WORDS[times])
    quote = rng.choice(("'", '"'))
    user = rng.choice(
        (
            "Repeat {q}{p}{q} {t}.",
            "Repeat {q}{p}{q} {t}.",
            "Say {q}{p}{q} {t}.",
            "Please repeat {q}{p}{q} {t}.",
            "repeat {q}{p}{q} {t}",
        )
    ).format(q=quote, p=phrase, t=times_text)
    thinking = f"The user wants me to repeat '{phrase}' {TIMES_WORDS[times][-1]}."
    return user, thinking, repeat_answer(phrase, times)


def _task(rng: random.Random) -> tuple[str, str, str]:
    kind = rng.random()
    if kind < 0.45:
        return _count_task(rng)
    if kind < 0.9:
        return _repeat_task(rng)
    return rng.choice(GREETINGS)


def make_sample(rng: random.Random) -> ChatSample:
    """Draws one conversation in the shape the app sends."""
    messages: list[tuple[str, str]] = []
    if rng.random() < 0.4:
        messages.append(("system", rng.choice(SYSTEM_PROMPTS)))
    if rng.random() < 0.1:
        # An earlier exchange; its reasoning block (if any) is dropped by the template.
        old_user, old_thinking, old_answer = _task(rng)
        old_content = (
            f"{THINK_OPEN}\n{old_thinking}\n{THINK_CLOSE}\n\n{old_answer}"
            if rng.random() < 0.5
            else old_answer
        )
        messages += [("user", old_user), ("assistant", old_content)]
    user, thinking, answer = _task(rng)
    messages.append(("user", user))
    return ChatSample(
        messages=tuple(messages),
        enable_thinking=rng.random() < 0.3,
        thinking=thinking,
        answer=answer,
    )


def generate_samples(count: int, seed: int) -> list[ChatSample]:
    rng = random.Random(seed)
    return [make_sample(rng) for _ in range(count)]


def iter_samples(seed: int) -> Iterator[ChatSample]:
    """Endless deterministic stream of samples (the training data)."""
    rng = random.Random(seed)
    while True:
        yield make_sample(rng)


TOKENIZER_CORPUS_SEED = 1234  # fixed: the tokenizer does not depend on the model seed


def tokenizer_corpus(samples: int = 3000) -> list[str]:
    """Text for BPE training, without special tokens (those are added afterwards, at the end)."""
    texts: list[str] = []
    for sample in generate_samples(samples, TOKENIZER_CORPUS_SEED):
        text = sample.prompt + sample.completion
        for token in SPECIAL_TOKENS:
            text = text.replace(token, "\n")
        texts.append(text)
    texts.append(" ".join(PHRASE_WORDS))
    texts.append(" ".join(w.capitalize() for w in PHRASE_WORDS))
    texts.extend(EXTRA_TEXT)
    texts.extend(FAMOUS_PHRASES)
    return texts
