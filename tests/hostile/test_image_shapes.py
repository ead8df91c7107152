"""Image shapes sent to the API (issue 45 item 7): a 1x30000 PNG reached the engine and came
back as an HTTP 500 ("Absolute aspect ratio must be smaller than 200"). Hypothesis draws
shapes from 1x1 to strips 30,000 long, in every format the server takes, with and without
`detail: "low"`, through the planner as the server runs it. Properties: a shape the engine
takes (at most 200:1 and 40 million pixels) is planned, and its image file (shrunk or not)
keeps to the ratio; any other is refused up front with a 400 that names the limit."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.generation.images import MAX_ASPECT_RATIO, MAX_IMAGE_PIXELS
from qwen_mtp_desktop.server.generation.planning import plan_messages
from qwen_mtp_desktop.server.http.errors import ApiError

_SUFFIXES = {"PNG": "png", "JPEG": "jpeg", "WEBP": "webp", "GIF": "gif", "BMP": "bmp"}


def _data_url(fmt: str, width: int, height: int) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(buffer, fmt)
    return f"data:image/{_SUFFIXES[fmt]};base64," + base64.b64encode(buffer.getvalue()).decode()


def _request(url: str, detail: str | None) -> Any:
    image: dict[str, Any] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    content = [{"type": "image_url", "image_url": image}, {"type": "text", "text": "What?"}]
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return parse_request(json.dumps(body).encode())


def _fits(width: int, height: int) -> bool:
    return (
        max(width, height) <= MAX_ASPECT_RATIO * min(width, height)
        and width * height <= MAX_IMAGE_PIXELS
    )


_side = st.one_of(st.integers(1, 40), st.integers(1, 30_000))


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, int]:
    """Near the ratio's edge half the time (where rounding would cross it), anywhere else."""
    short = draw(st.integers(1, 40))
    if draw(st.booleans()):
        long = short * MAX_ASPECT_RATIO + draw(st.integers(-2, 2))
    else:
        long = draw(_side)
    long = max(1, min(long, 30_000))
    return (short, long) if draw(st.booleans()) else (long, short)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=shapes(),
    fmt=st.sampled_from(sorted(_SUFFIXES)),
    detail=st.sampled_from([None, "low", "high", "auto"]),
)
@example(shape=(1, 30_000), fmt="PNG", detail=None)  # the report's image
@example(shape=(30_000, 1), fmt="PNG", detail=None)
@example(shape=(1, 200), fmt="PNG", detail=None)  # the widest the engine answered
@example(shape=(1, 201), fmt="PNG", detail=None)  # the first it refused
@example(shape=(3, 600), fmt="PNG", detail="low")  # shrunk to 2x512 before the fix
def test_an_image_shape_is_planned_or_refused_naming_the_limit(
    shape: tuple[int, int], fmt: str, detail: str | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from PIL import Image

    width, height = shape
    if fmt == "WEBP" and max(shape) > 16383:
        return  # WebP cannot hold it at all; the client could not have sent one
    request = _request(_data_url(fmt, width, height), detail)
    folder = tmp_path_factory.mktemp("images")
    if not _fits(width, height):
        with pytest.raises(ApiError) as caught:
            plan_messages(request, vision=True, image_dir=lambda: folder)
        assert caught.value.status == 400
        assert f"{width}x{height}" in caught.value.message
        assert str(MAX_ASPECT_RATIO) in caught.value.message or "million" in caught.value.message
        return
    [message] = plan_messages(request, vision=True, image_dir=lambda: folder)
    assert message.image is not None
    with Image.open(message.image) as written:
        w, h = written.size
    assert max(w, h) <= MAX_ASPECT_RATIO * min(w, h), (shape, detail, (w, h))


def test_the_reported_strip_is_a_400_naming_the_limit(tmp_path: Path) -> None:
    request = _request(_data_url("PNG", 1, 30_000), None)
    with pytest.raises(ApiError) as caught:
        plan_messages(request, vision=True, image_dir=lambda: tmp_path)
    error = caught.value
    assert error.status == 400 and error.param == "messages[0].content[0].image_url.url"
    assert "at most 200 times" in error.message
    assert not list(tmp_path.iterdir()), "a refused image was written for the engine"
