"""Image parts of a request: `data:` URLs only, decoded under limits into files the engine reads.

The server never fetches a URL on a client's behalf (that would let any local program make
this machine reach out to the network, and a slow host would hold the engine queue). An image
is checked with Pillow before the engine sees it: the format must be one Pillow reads and the
pixel count bounded (a small PNG can declare gigapixels), and the shape one the vision encoder
takes (a 1x30000 strip failed inside the engine: an HTTP 500 instead of a 400).
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings
from pathlib import Path

from qwen_mtp_desktop.server.http.errors import ApiError

#: Decoded bytes per image; the request body limit bounds the total.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: Pixels per image (Pillow warns at 89 M; a vision encoder gains nothing from that many).
MAX_IMAGE_PIXELS = 40_000_000
#: The longer side may be at most this many times the shorter: openvino-genai's Qwen-VL
#: preprocessing refuses more ("Absolute aspect ratio must be smaller than 200"; measured on the
#: demo model, 2026-12-07: 1x200 answered, 1x201 and 1x30000 failed).
MAX_ASPECT_RATIO = 200
_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp"}
#: The accepted formats in words, from `_FORMATS` (an error lists every one).
ACCEPTED = "a PNG, JPEG, WebP, GIF or BMP"
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]*)*?);base64,", re.I)


def decode_data_url(url: str, param: str) -> tuple[bytes, str]:
    """(image bytes, file suffix) of a base64 `data:` URL; ApiError 400 for anything else."""
    head = url[:300]
    if not head.lower().startswith("data:"):
        scheme = head.split(":", 1)[0].lower() if ":" in head else ""
        where = f"a {scheme}: URL" if scheme and len(scheme) < 12 else "not a data: URL"
        raise ApiError(
            400,
            f"Image URLs must be base64 data: URLs (data:image/png;base64,...); this one is "
            f"{where}. The server does not fetch remote images: download the image and send "
            "its bytes.",
            code="invalid_image_url",
            param=param,
        )
    match = _DATA_URL.match(head)
    if match is None:
        raise ApiError(
            400,
            "The image's data: URL is not base64-encoded (expected data:image/png;base64,...).",
            code="invalid_image_url",
            param=param,
        )
    payload = url[match.end() :]
    if len(payload) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise ApiError(
            400,
            f"The image is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB; send a smaller one.",
            code="image_too_large",
            param=param,
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(
            400, "The image's base64 data is damaged.", code="invalid_image", param=param
        ) from None
    return data, _check_image(data, param)


def check_shape(width: int, height: int, param: str) -> None:
    """ApiError 400 naming the limit for a shape the engine cannot read (checked up front, so
    the request fails before it queues, not inside the engine)."""
    if width * height > MAX_IMAGE_PIXELS:
        raise ApiError(
            400,
            f"The image is {width}x{height} pixels; at most "
            f"{MAX_IMAGE_PIXELS // 1_000_000} million pixels are accepted.",
            code="image_too_large",
            param=param,
        )
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise ApiError(
            400,
            f"The image is {width}x{height} pixels; its longer side may be at most "
            f"{MAX_ASPECT_RATIO} times its shorter side. Crop it or pad it to a less narrow "
            "shape.",
            code="invalid_image",
            param=param,
        )


def _check_image(data: bytes, param: str) -> str:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                fmt = image.format or ""
                check_shape(width, height, param)
                image.verify()
    except ApiError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ApiError(
            400, "The image declares too many pixels.", code="image_too_large", param=param
        ) from None
    except Exception as exc:  # Pillow raises many kinds for damaged data
        raise ApiError(
            400,
            f"The image cannot be read ({type(exc).__name__}); send {ACCEPTED}.",
            code="invalid_image",
            param=param,
        ) from None
    if fmt not in _FORMATS:
        raise ApiError(
            400,
            f"Images in {fmt or 'this'} format are not accepted; send {ACCEPTED}.",
            code="invalid_image",
            param=param,
        )
    return _FORMATS[fmt]


def write_image(folder: Path, index: int, data: bytes, suffix: str) -> Path:
    path = folder / f"image-{index}{suffix}"
    path.write_bytes(data)
    return path


#: OpenAI's low detail: the image read at most this many pixels on its longer side.
LOW_DETAIL_PIXELS = 512


def low_detail(data: bytes) -> tuple[bytes, str]:
    """`image_url.detail: "low"`: the (checked) image shrunk to at most 512 pixels on its
    longer side, as PNG bytes and their suffix."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        small = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    small.thumbnail((LOW_DETAIL_PIXELS, LOW_DETAIL_PIXELS))
    # Rounding the shorter side can push a narrow image past the engine's ratio (3x600 to
    # 2x512): widen it back to the least side the ratio allows.
    width, height = small.size
    least = -(-max(width, height) // MAX_ASPECT_RATIO)
    if min(width, height) < least:
        small = small.resize((max(width, least), max(height, least)))
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue(), ".png"
