"""Deterministic tool-calling chats for the tiny tool model (pure Python, no torch).

The tool model learns what Qwen3.5 does with tools, in the demo template's format (the
"# Tools" system block, `<tool_call>` answers, `<tool_response>` results): a question a tool
answers gets a call whose arguments come from the question; the turn after the tool's result
gets a short answer that uses it; a question no tool answers gets text. Two small functions:
`get_weather(city)` and `add(a, b)`, offered exactly as the tests' MCP server
(tests/mcp_server.py) offers them, so the chat window and the API show the model the prompt it
was trained on.

A model this small (hidden size 64) generalises over phrasings and combinations, not over new
words: cities come from a closed list (all of them seen in training) and numbers are digits
(Qwen's pre-tokenizer splits them), which the model copies. Some (phrasing, city) pairs and
some (phrasing, number) pairs are never trained on: the build's self-check asks those.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qwen_mtp_desktop.core.tools.calls import Calls, parse, render_calls
from qwen_mtp_desktop.devtools import corpus

# --- the tools, as the tests' MCP server describes them (a test holds the two equal) -------------

ADD_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two whole numbers.",
        "parameters": {
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "title": "addArguments",
            "type": "object",
        },
    },
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "properties": {"city": {"title": "City", "type": "string"}},
            "required": ["city"],
            "title": "get_weatherArguments",
            "type": "object",
        },
    },
}
#: The tools the model is trained with (in the MCP server's order: add, then get_weather),
#: offered together or not at all. (Chats offering one of the two, whose other questions get
#: a refusal, were tried: the model then refused offered tools too, 3 of 300 held-out chats.)
BOTH_TOOLS: tuple[dict[str, Any], ...] = (ADD_TOOL, WEATHER_TOOL)
#: Chats with no tools block (as with `tool_choice: "none"`), beyond the short first ones.
NO_TOOLS_SHARE = 0.15

CITIES: tuple[str, ...] = (
    "Paris",
    "London",
    "Tokyo",
    "Berlin",
    "Madrid",
    "Rome",
    "Oslo",
    "Cairo",
    "Lima",
    "Sydney",
    "Dublin",
    "Vienna",
    "Prague",
    "Lisbon",
    "Seoul",
    "Toronto",
)
CONDITIONS: tuple[str, ...] = ("sunny", "cloudy", "rainy", "windy", "snowy", "foggy")
MAX_TEMPERATURE = 35
MAX_ADDEND = 99  # two digits at most, as the demo's numbers


def weather_report(city: str) -> str:
    """What the tests' MCP server answers for `get_weather(city)`: a made-up but fixed
    forecast, so a test knows what the model's answer must contain."""
    code = sum(ord(char) for char in city)
    return f"{city}: {CONDITIONS[code % len(CONDITIONS)]}, {code % (MAX_TEMPERATURE + 1)} C"


def add_report(a: int, b: int) -> str:
    """What the tests' MCP server answers for `add(a, b)`."""
    return f"{a} + {b} = {a + b}"


WEATHER_QUESTIONS: tuple[str, ...] = (
    "What is the weather in {city}?",
    "What's the weather like in {city}?",
    "How is the weather in {city} today?",
    "Weather in {city}?",
    "weather in {city}",
    "Tell me the weather in {city}.",
    "Is it sunny in {city}?",
    "Is it raining in {city} right now?",
    "Do I need an umbrella in {city}?",
    "How warm is it in {city}?",
    "What is the temperature in {city}?",
    "Check the weather in {city}, please.",
    "Can you look up the weather for {city}?",
    "I am going to {city}. What is the weather there?",
    "{city} weather, please.",
)
ADD_QUESTIONS: tuple[str, ...] = (
    "What is {a} plus {b}?",
    "What is {a} + {b}?",
    "Add {a} and {b}.",
    "add {a} and {b}",
    "Please add {a} and {b}.",
    "What do {a} and {b} add up to?",
    "Can you add {a} and {b}?",
    "How much is {a} plus {b}?",
    "Compute {a} + {b}.",
    "What is the sum of {a} and {b}?",
)
#: Questions no tool answers: (phrasings, thinking, answer). The last phrasing of each is held
#: out; it is made of words the others use (a word never seen is beyond this model).
CHAT_QUESTIONS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("Hello", "Hello!", "Hi!", "Hi", "hello", "Hi there", "Good morning", "Hello there"),
        "The user is greeting me.",
        "Hello! I can check the weather and add numbers.",
    ),
    (
        ("Who are you?", "Who are you", "who are you?", "What are you?"),
        "The user asks who I am.",
        "I am a tiny demo model that can call tools.",
    ),
    (
        ("What can you do?", "What can you do for me?", "Help", "help", "How can you help me?"),
        "The user asks what I can do.",
        "I can check the weather in a city and add two numbers.",
    ),
    (
        ("Thanks!", "Thank you", "thanks", "Thank you very much.", "Thanks"),
        "The user thanks me.",
        "You are welcome!",
    ),
    (
        ("Tell me a joke.", "Write a poem.", "Write a story.", "Tell me a story."),
        "The user asks for something my tools cannot do.",
        "Sorry, I can only check the weather and add numbers.",
    ),
)
NO_TOOL_ANSWER = "Sorry, I have no tool for that here."
DENIED = "The user denied this tool call."  # the chat's result for a denied call
DENIED_ANSWER = "I could not use the tool, so I cannot answer that."
ERROR_RESULTS: tuple[str, ...] = (
    "Error: the tool failed: broken",
    "Error: The tool 'get_weather' of MCP server 'tests' did not answer within 60 s",
    "Error: unknown city",
)
ERROR_ANSWER = "The tool failed, so I cannot answer that."

#: How many earlier exchanges a conversation has: none below the first, one below the second.
EARLIER_NONE, EARLIER_ONE = 0.5, 0.8
#: One in this many (phrasing, value) pairs is held out of training for the self-check.
HOLD_OUT_EVERY = 5


def _held_out(phrasing: int, value: int) -> bool:
    return (phrasing * 7 + value * 3) % HOLD_OUT_EVERY == 0


@dataclass(frozen=True)
class ToolSample:
    """One training conversation with tools: `messages` are what the engine passes the
    template (OpenAI-style dicts), `completion` what the model must write after the prompt."""

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...]
    enable_thinking: bool
    thinking: str
    answer: str
    #: The call the answer makes (name, arguments), if any: what the self-check compares.
    call: tuple[str, Mapping[str, Any]] | None = field(default=None, compare=False)

    @property
    def prompt(self) -> str:
        return corpus.render_chat(
            self.messages,
            add_generation_prompt=True,
            enable_thinking=self.enable_thinking,
            tools=self.tools or None,
        )

    @property
    def completion(self) -> str:
        if self.enable_thinking:
            return f"{self.thinking}\n{corpus.THINK_CLOSE}\n\n{self.answer}{corpus.IM_END}"
        return self.answer + corpus.IM_END

    def pieces(self) -> list[tuple[str, bool]]:
        """The earlier answers are trained too: the same skills (calls with the question's
        values, answers with the result's), so the long tools prompt is paid once for them."""
        return [*corpus.split_earlier_answers(self.prompt), (self.completion, True)]


@dataclass(frozen=True)
class _Task:
    """A question and what follows it: the call (if a tool answers it), the tool's result,
    and the thinking and text of both rounds."""

    question: str
    call: tuple[str, dict[str, Any]] | None
    result: str
    call_thinking: str
    answer_thinking: str
    answer: str


def _weather_task(rng: random.Random, held_out: bool) -> _Task:
    while True:
        phrasing = rng.randrange(len(WEATHER_QUESTIONS))
        city_index = rng.randrange(len(CITIES))
        if _held_out(phrasing, city_index) == held_out:
            break
    city = CITIES[city_index]
    condition = rng.choice(CONDITIONS)
    temperature = rng.randint(0, MAX_TEMPERATURE)
    return _Task(
        question=WEATHER_QUESTIONS[phrasing].format(city=city),
        call=("get_weather", {"city": city}),
        result=f"{city}: {condition}, {temperature} C",
        call_thinking=f"The user wants the weather in {city}. I will call get_weather.",
        answer_thinking=f"The tool says it is {condition} in {city}.",
        answer=f"It is {condition} and {temperature} C in {city}.",
    )


def _add_task(rng: random.Random, held_out: bool) -> _Task:
    while True:
        phrasing = rng.randrange(len(ADD_QUESTIONS))
        a, b = rng.randint(0, MAX_ADDEND), rng.randint(0, MAX_ADDEND)
        if _held_out(phrasing, a + b) == held_out:
            break
    return _Task(
        question=ADD_QUESTIONS[phrasing].format(a=a, b=b),
        call=("add", {"a": a, "b": b}),
        result=add_report(a, b),
        call_thinking=f"The user wants {a} plus {b}. I will call add.",
        answer_thinking=f"The tool says the sum is {a + b}.",
        answer=f"The sum of {a} and {b} is {a + b}.",
    )


def _chat_task(rng: random.Random, held_out: bool) -> _Task:
    phrasings, thinking, answer = rng.choice(CHAT_QUESTIONS)
    # The last phrasing of each group is held out.
    choices = phrasings[-1:] if held_out else phrasings[:-1]
    return _Task(rng.choice(choices), None, "", thinking, thinking, answer)


def _draw_task(rng: random.Random, held_out: bool) -> _Task:
    kind = rng.random()
    if kind < 0.4:
        return _weather_task(rng, held_out)
    if kind < 0.8:
        return _add_task(rng, held_out)
    return _chat_task(rng, held_out)


def _call_messages(task: _Task, result: str) -> list[Mapping[str, Any]]:
    """The calling turn as the chat and the API send it back (no text: its reasoning is not
    kept), then the result as a tool message."""
    assert task.call is not None
    name, arguments = task.call
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": result, "tool_call_id": "call_0"},
    ]


def _earlier_exchange(rng: random.Random) -> list[Mapping[str, Any]]:
    """A finished exchange before the question: the chat window sends the whole conversation,
    earlier calls and results included (with no tools shown, as with `tool_choice: "none"`,
    the calls are still rendered)."""
    task = _draw_task(rng, held_out=False)
    question: Mapping[str, Any] = {"role": "user", "content": task.question}
    if task.call is None:
        return [question, {"role": "assistant", "content": task.answer}]
    return [
        question,
        *_call_messages(task, task.result),
        {"role": "assistant", "content": task.answer},
    ]


def make_tool_sample(
    rng: random.Random, *, held_out: bool = False, short: bool = False
) -> ToolSample:
    """Draws one conversation in the shape the chat and the API send: tools (or none), maybe
    a system prompt and earlier exchanges, then the question or a tool's result to answer.
    `short`: never a tools block (see iter_tool_samples)."""
    shown = not short and rng.random() >= NO_TOOLS_SHARE
    tools: tuple[Mapping[str, Any], ...] = BOTH_TOOLS if shown else ()
    messages: list[Mapping[str, Any]] = []
    if rng.random() < 0.3:
        messages.append({"role": "system", "content": rng.choice(corpus.SYSTEM_PROMPTS)})
    earlier = rng.random()
    for _ in range(0 if earlier < EARLIER_NONE else 1 if earlier < EARLIER_ONE else 2):
        messages += _earlier_exchange(rng)
    task = _draw_task(rng, held_out)
    messages.append({"role": "user", "content": task.question})
    thinking = rng.random() < 0.3
    if task.call is None:
        return ToolSample(tuple(messages), tools, thinking, task.call_thinking, task.answer)
    name, arguments = task.call
    # Without a tools block, a tool's question gets a refusal, or the model answers a result
    # already there (a client's `tool_choice: "none"` after its calls).
    if not tools and rng.random() < 0.3:
        thinking_text = f"I have no tool for this. The tools I have cannot call {name}."
        return ToolSample(tuple(messages), tools, thinking, thinking_text, NO_TOOL_ANSWER)
    if tools and rng.random() < 0.5:  # the round that calls
        call_text = render_calls([(name, arguments)])
        return ToolSample(
            tuple(messages), tools, thinking, task.call_thinking, call_text, (name, arguments)
        )
    result, answer, answer_thinking = task.result, task.answer, task.answer_thinking
    outcome = rng.random()
    if outcome < 0.05:
        result, answer, answer_thinking = DENIED, DENIED_ANSWER, "The user denied the call."
    elif outcome < 0.1:
        result, answer = rng.choice(ERROR_RESULTS), ERROR_ANSWER
        answer_thinking = "The tool failed."
    messages += _call_messages(task, result)
    return ToolSample(tuple(messages), tools, thinking, answer_thinking, answer)


def value_words() -> list[str]:
    """The words a tool chat copies (from a question into a call, from a result into an
    answer): training weighs their tokens more."""
    return [*CITIES, *CONDITIONS, *"0123456789"]


#: Training's first samples have no tools block (see iter_tool_samples).
SHORT_SAMPLES_FIRST = 3200


def iter_tool_samples(seed: int, short_first: int = SHORT_SAMPLES_FIRST) -> Iterator[ToolSample]:
    """Endless deterministic stream of training samples (held-out pairs never appear).

    The first `short_first` have no tools block: about 120 tokens instead of 400, so the model
    learns to copy (values from a question into a call written earlier, a result's into an
    answer) at a quarter of the cost. Measured (seed 0, Qwen3.5's 3:1 layers): trained only
    on full-length chats it still wrote the same values for every question after 1,000 steps
    (15 minutes, loss about 0.8); on the short ones alone it copied after 500-600 steps (2
    minutes), and 100 steps after them the full chats' loss was 0.27."""
    rng = random.Random(seed)
    for _ in range(short_first):
        yield make_tool_sample(rng, short=True)
    while True:
        yield make_tool_sample(rng)


def held_out_samples(count: int, seed: int) -> list[ToolSample]:
    """Samples built only from held-out phrasings and (phrasing, value) pairs, tools offered
    as the tests offer them (both), for the build's self-check."""
    rng = random.Random(seed)
    samples: list[ToolSample] = []
    while len(samples) < count:
        sample = make_tool_sample(rng, held_out=True)
        if sample.tools == BOTH_TOOLS:
            samples.append(sample)
    return samples


TOOL_TOKENIZER_CORPUS_SEED = 4321


def tool_tokenizer_corpus(samples: int = 3000) -> list[str]:
    """BPE training text (no special tokens): rendered tool chats, so the tools block, the
    call format and the questions' words become whole tokens, plus the demo's plain words."""
    texts: list[str] = []
    rng = random.Random(TOOL_TOKENIZER_CORPUS_SEED)
    for _ in range(samples):
        sample = make_tool_sample(rng, held_out=rng.random() < 0.2)
        text = sample.prompt + sample.completion
        for token in corpus.SPECIAL_TOKENS:
            text = text.replace(token, "\n")
        texts.append(text)
    texts.append(" ".join(corpus.PHRASE_WORDS))
    texts.append(" ".join(word.capitalize() for word in corpus.PHRASE_WORDS))
    texts.extend(corpus.EXTRA_TEXT)
    return texts


def _visible(completion: str) -> str | None:
    """The answer after the reasoning (if any), without the end token; None if unfinished."""
    if not completion.endswith(corpus.IM_END):
        return None
    return completion.removesuffix(corpus.IM_END).split(corpus.THINK_CLOSE + "\n\n")[-1]


def judge_answers(samples: Sequence[corpus.Sample], texts: Sequence[str]) -> list[str]:
    """What the model got wrong on the self-check's chats: a call must be the expected call
    (name and arguments, read by the app's own parser), any other answer the expected text.
    The reasoning before either is not judged (it is only shown)."""
    problems: list[str] = []
    for sample, text in zip(samples, texts, strict=True):
        assert isinstance(sample, ToolSample)
        question = [m["content"] for m in sample.messages if m["role"] == "user"][-1]
        got, expected = _visible(text), _visible(sample.completion)
        if got is None:
            problems.append(f"{question!r}: no end in {text!r}")
        elif sample.call is not None:
            parsed = parse(got, sample.tools)
            name, arguments = sample.call
            if not isinstance(parsed, Calls) or [
                (call.name, json.loads(call.arguments)) for call in parsed.calls
            ] != [(name, dict(arguments))]:
                problems.append(f"{question!r}: expected a call of {name}{arguments}, got {got!r}")
        elif got != expected:
            problems.append(f"{question!r}: expected {expected!r}, got {got!r}")
    return problems


def is_held_out(question: str) -> bool:
    """Whether training never saw `question` (a held-out phrasing, or a phrasing with a city
    or a sum it was not trained with); ValueError for a question the corpus cannot ask."""
    for phrasing, template in enumerate(WEATHER_QUESTIONS):
        for index, city in enumerate(CITIES):
            if template.format(city=city) == question:
                return _held_out(phrasing, index)
    for phrasing, template in enumerate(ADD_QUESTIONS):
        pattern = re.escape(template).replace(r"\{a\}", r"(\d+)").replace(r"\{b\}", r"(\d+)")
        if match := re.fullmatch(pattern, question):
            return _held_out(phrasing, int(match[1]) + int(match[2]))
    for phrasings, _thinking, _answer in CHAT_QUESTIONS:
        if question in phrasings:
            return question == phrasings[-1]
    raise ValueError(f"not a question of the tool corpus: {question!r}")
