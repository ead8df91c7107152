"""Images through a real `serve` process and its engine process (issue 27 item 4): the image
files the server writes must live until the engine process has read them. Five sizes and
formats, streamed and not, are each answered; the server's image folders are cleaned up."""

from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path

import openai
import pytest

from tests.remote_server import client_of

pytestmark = pytest.mark.subprocess

#: (format, size, mode): PNG, GIF, JPEG, BMP and WebP, tiny to larger than the vision
#: encoder's tile, square and not.
IMAGES = [
    ("PNG", (32, 32), "RGB"),
    ("GIF", (64, 48), "P"),
    ("JPEG", (300, 200), "RGB"),
    ("BMP", (17, 129), "RGB"),
    ("WEBP", (640, 480), "RGB"),
]


@pytest.fixture(scope="module")
def client(demo_url: str) -> openai.OpenAI:
    return client_of(demo_url, timeout=300)


def served(client: openai.OpenAI) -> str:
    return client.models.list().data[0].id


def data_url(fmt: str, size: tuple[int, int], mode: str) -> str:
    from PIL import Image

    image = Image.new("RGB", size, (200, 40, 40))
    for x in range(0, size[0], 7):  # some structure, not one flat colour
        for y in range(size[1]):
            image.putpixel((x, y), (20, 160, 220))
    buffer = io.BytesIO()
    image.convert(mode).save(buffer, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buffer.getvalue()).decode()


def question(url: str) -> list[dict[str, object]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "Count from 1 to 3."},
            ],
        }
    ]


def server_image_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("qwen-mtp-api-*"))


@pytest.mark.parametrize(("fmt", "size", "mode"), IMAGES, ids=[i[0] for i in IMAGES])
def test_an_image_is_answered_through_serve(
    client: openai.OpenAI, fmt: str, size: tuple[int, int], mode: str
) -> None:
    url = data_url(fmt, size, mode)
    response = client.chat.completions.create(
        model=served(client),
        messages=question(url),  # type: ignore[arg-type]
        max_tokens=8,
    )
    assert response.choices[0].finish_reason in ("stop", "length")
    assert response.usage is not None and response.usage.completion_tokens > 0
    assert response.usage.prompt_tokens > 10  # the image's tokens are in the prompt
    streamed = client.chat.completions.create(
        model=served(client),
        messages=question(url),  # type: ignore[arg-type]
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(streamed)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == response.choices[0].message.content
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens == response.usage.prompt_tokens


def test_the_server_cleans_up_its_image_folders(client: openai.OpenAI) -> None:
    before = server_image_folders()
    client.chat.completions.create(
        model=served(client),
        messages=question(data_url("PNG", (48, 48), "RGB")),  # type: ignore[arg-type]
        max_tokens=4,
    )
    assert server_image_folders() <= before


def test_several_images_in_one_message_are_all_read(client: openai.OpenAI) -> None:
    """Issue 43, item 6: a message may hold more than one image; each one's vision tokens are
    in the prompt (so each was read), in the chat completions and the Responses shapes."""
    one = data_url("PNG", (32, 32), "RGB")
    two = data_url("JPEG", (64, 48), "RGB")
    counts = []
    for urls in ([one], [one, two], [one, two, one]):
        parts: list[dict[str, object]] = [
            {"type": "image_url", "image_url": {"url": url}} for url in urls
        ]
        parts.append({"type": "text", "text": "Count from 1 to 3."})
        response = client.chat.completions.create(
            model=served(client),
            messages=[{"role": "user", "content": parts}],  # type: ignore[list-item]
            max_tokens=4,
        )
        assert response.usage is not None and response.usage.completion_tokens > 0
        counts.append(response.usage.prompt_tokens)
    assert counts[0] < counts[1] < counts[2], counts
    # Both images cost more than either alone: the second was not dropped or merged.
    alone = client.chat.completions.create(
        model=served(client),
        messages=[  # type: ignore[list-item]
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": two}},
                    {"type": "text", "text": "Count from 1 to 3."},
                ],
            }
        ],
        max_tokens=4,
    )
    assert alone.usage is not None and counts[1] > alone.usage.prompt_tokens > 10
    items = client.responses.create(
        model=served(client),
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": one, "detail": "auto"},
                    {"type": "input_image", "image_url": two, "detail": "low"},
                    {"type": "input_text", "text": "Count from 1 to 3."},
                ],
            }
        ],
        max_output_tokens=4,
    )
    assert items.usage is not None and items.usage.input_tokens > counts[0]
