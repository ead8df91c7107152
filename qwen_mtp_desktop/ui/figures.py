"""What every figure the app shows means, in words a new user understands: the one-line legend
under the chat, and the tooltips of the stats lines and benchmark columns."""

from __future__ import annotations

from html import escape

from qwen_mtp_desktop.core.units import plain_figures

#: One line, shown under the chat's stats.
LEGEND = (
    "tok/s: writing speed  ·  TTFT: wait for the first token  ·  drafts accepted: MTP's guesses "
    "the model kept (per step: extra tokens each step)  ·  MTP n=k: k guesses per step  ·  "
    "plain: no MTP"
)

#: Each figure and its explanation, in the order the stats line shows them.
FIGURES: tuple[tuple[str, str], ...] = (
    (
        "MTP n=k",
        "Decoded with the model's MTP head guessing k tokens ahead each step (Chat options › Draft "
        "tokens). The model checks the guesses and keeps only what it would have written itself, "
        "so the answer is the same as plain decoding, only faster when guesses are kept.",
    ),
    ("plain", "Plain decoding: one token per step, no MTP guesses."),
    (
        "drafts accepted",
        "The share of MTP's guessed tokens the model kept. Higher means more tokens per step.",
    ),
    (
        "/step",
        "Guessed tokens kept per decoding step: 1.00/step means every step wrote two tokens "
        "instead of one.",
    ),
    (
        "tok/s",
        "Tokens per second while the answer is being written (after the first token).",
    ),
    (
        "chunks/s",
        "Pieces of text per second as a remote server streams them (after the first). Many "
        "servers send one token per piece, some send several; the answer's exact token count "
        "and tok/s come from the server when it ends.",
    ),
    (
        "TTFT",
        "Time to first token: from sending until the answer starts; mostly reading the prompt.",
    ),
    (
        "reused",
        "Prompt tokens reused: the conversation's earlier tokens were already processed and "
        "kept; only the new ones were prefilled, so the answer started sooner. (The model's "
        "state is kept per chat within Settings › Conversation memory.)",
    ),
    (
        "prompt tokens",
        "Tokens the model read before answering: the whole conversation so far.",
    ),
    ("tokens", "Tokens in the answer (a token is a word or part of a word)."),
    (
        "Auto",
        "Auto picks the draft depth from the benchmark and adapts it turn by turn; it decodes "
        "plain when guesses are rarely kept.",
    ),
)

#: Tooltips of the benchmark table's columns.
COLUMN_HELP = {
    "Method": "Plain decoding, MTP with n guessed tokens per step, or prompt lookup with up "
    "to K tokens copied from the conversation per step",
    "Decode tok/s (min–max)": "Writing speed after the first token: median of the runs, "
    "with the slowest and fastest",
    "Speed-up (min–max)": "Decode speed relative to plain decoding, round by round: the median "
    "of the per-round ratios, with the lowest and highest (1.00x = the same)",
    "TTFT ms": "Time to first token, in milliseconds",
    "Accepted": "Share of MTP's guessed tokens the model kept",
    "Per step": "Guessed tokens kept per decoding step",
    "By position": "Acceptance of the 1st, 2nd, … guessed token of each step",
    "Identical": "Whether the output equals plain decoding token for token",
    "First difference": "Where MTP's output first differs from plain decoding",
    "Plain tok/s": "Writing speed of plain decoding",
    "MTP tok/s": "Writing speed with MTP",
    "Prompt lookup tok/s": "Writing speed with prompt lookup",
    "Speed-up": "MTP's speed relative to plain decoding",
}


def stats_tooltip(text: str) -> str:
    """Rich-text explanation of the figures that appear in the stats line `text`."""
    text = plain_figures(text)
    rows = [
        f"<tr><td><b>{escape(name)}</b></td><td>{escape(help_text)}</td></tr>"
        for name, help_text in FIGURES
        if _shows(name, text)
    ]
    if not rows:
        return ""
    return "<table cellspacing='4'>" + "".join(rows) + "</table>"


def _shows(name: str, text: str) -> bool:
    if name == "MTP n=k":
        return "MTP n=" in text
    return name in text
