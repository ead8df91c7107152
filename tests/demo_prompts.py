"""Generated prompts for the exactness properties (MTP, prompt lookup and the chain reference
against plain decoding on the demo model): what the demo model was trained on (counting,
repeating a phrase) and free text, where it is unsure."""

from __future__ import annotations

import string

from hypothesis import strategies as st

WORDS = ["good morning", "we like apples", "blue", "tea time", "hello"]
PROMPTS = st.one_of(
    st.builds(
        lambda start, count: f"Count from {start} to {start + count}.",
        st.integers(0, 90),
        st.integers(1, 19),
    ),
    st.builds(
        lambda word, times: f"Repeat '{word}' {times} times.",
        st.sampled_from(WORDS),
        st.sampled_from(["two", "three", "four"]),
    ),
    st.text(alphabet=string.ascii_letters + string.digits + " .,!?'", min_size=1, max_size=40),
)
