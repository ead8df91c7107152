"""How far a remote answer's stream has come, and the live figures the chat shows from it.

A server streams text, not token ids, so the live line counts only what the stream itself
says: the server's own completion token count when it sends `usage` with its text events
(vLLM's continuous usage; our `serve`, OpenAI and llama.cpp send `usage` once, after the last
text), else the text events ("chunks": llama.cpp, vLLM and `serve` without drafts send about
one token each, `serve` with MTP several, so they are never called tokens). The answer's
token count and tok/s come with its stats at the end (core.remote.client) and replace these.

Timing is the client's, as in the final stats: TTFT from sending the request to the first
text event, a rate counts the units after the first over the time between the first and the
latest (the first event's time is the wait, not writing).
"""

from __future__ import annotations

from dataclasses import dataclass

from qwen_mtp_desktop.core.units import count, ttft_text


@dataclass(frozen=True)
class StreamProgress:
    """A remote answer's stream so far. Times are seconds from sending the request."""

    #: To the first text event (None before it).
    first_s: float | None = None
    #: To the latest text event taken.
    last_s: float = 0.0
    #: Text events taken (answer or reasoning; tool-call pieces are not shown text).
    chunks: int = 0
    #: The server's completion token count as of `tokens_s`, when it streams usage with its
    #: text; None when it sends none before the end.
    tokens: int | None = None
    tokens_s: float = 0.0

    def figures(self) -> list[str]:
        """ "41.2 tok/s · 350 tokens · TTFT 120 ms" from the server's streamed usage, else
        "38.5 chunks/s · 341 chunks · TTFT 120 ms"; [] before the first text."""
        if self.first_s is None:
            return []
        if self.tokens is not None:
            # The first event's tokens count as one, as in the final stats' tok/s.
            done, span, unit, noun = self.tokens, self.tokens_s - self.first_s, "tok/s", "token"
        else:
            done, span, unit, noun = self.chunks, self.last_s - self.first_s, "chunks/s", "chunk"
        parts = [count(done, noun), f"TTFT {ttft_text(self.first_s)}"]
        if span > 0 and done > 1:
            parts.insert(0, f"{(done - 1) / span:.1f} {unit}")
        return parts


__all__ = ["StreamProgress"]
