"""What every client case shares: the two tools the tool model was trained on (as plain
functions, named and described as in its training, so each framework's schema of them reads as
the model learnt), what they answer, and the calls they received."""

from __future__ import annotations

import os
from typing import Any

URL = os.environ["OPENAI_BASE_URL"]
KEY = os.environ["OPENAI_API_KEY"]
MODEL = "tool-model"

# As qwen_mtp_desktop/devtools/tool_corpus.py answers (a test holds the two equal).
CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy", "foggy")
MAX_TEMPERATURE = 35

#: Every call a tool received in the current case, as (name, arguments).
CALLS: list[tuple[str, dict[str, Any]]] = []


def weather_report(city: str) -> str:
    code = sum(ord(char) for char in city)
    return f"{city}: {CONDITIONS[code % len(CONDITIONS)]}, {code % (MAX_TEMPERATURE + 1)} C"


def get_weather(city: str) -> str:
    """The current weather in a city."""
    CALLS.append(("get_weather", {"city": city}))
    return weather_report(city)


def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    CALLS.append(("add", {"a": a, "b": b}))
    return f"{a} + {b} = {a + b}"


def calls() -> list[dict[str, Any]]:
    """The calls so far, as JSON, and a fresh list for the next case."""
    made = [{"name": name, "arguments": arguments} for name, arguments in CALLS]
    CALLS.clear()
    return made
