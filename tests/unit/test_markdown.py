from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.markdown import Segment, StreamingSegmenter, split_segments

SAMPLE = """# Title

Some *text* here
and more.

- a
- b

```python
print("hi")

x = 1
```
After code.
~~~
raw
~~~"""


def test_split_segments() -> None:
    assert split_segments(SAMPLE) == [
        Segment("markdown", "# Title"),
        Segment("markdown", "Some *text* here\nand more."),
        Segment("markdown", "- a\n- b"),
        Segment("code", 'print("hi")\n\nx = 1', "python"),
        Segment("markdown", "After code."),
        Segment("code", "raw", ""),
    ]


def test_unclosed_fence_runs_to_end() -> None:
    assert split_segments("intro\n```js\nlet a") == [
        Segment("markdown", "intro"),
        Segment("code", "let a", "js"),
    ]


def test_tail_while_streaming() -> None:
    segmenter = StreamingSegmenter()
    assert segmenter.feed("Hello wor") == []
    assert segmenter.tail == Segment("markdown", "Hello wor")
    assert segmenter.feed("ld\n\n```py\nx") == [Segment("markdown", "Hello world")]
    assert segmenter.in_code and segmenter.tail == Segment("code", "x", "py")


@given(st.text(alphabet="ab `\n#-*~py", max_size=200), st.lists(st.integers(1, 7), min_size=1))
def test_streaming_equals_whole_text(text: str, cuts: list[int]) -> None:
    segmenter = StreamingSegmenter()
    segments: list[Segment] = []
    position, index = 0, 0
    while position < len(text):
        size = cuts[index % len(cuts)]
        segments += segmenter.feed(text[position : position + size])
        position += size
        index += 1
    segments += segmenter.close()
    assert segments == split_segments(text)
