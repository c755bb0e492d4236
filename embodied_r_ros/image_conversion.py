"""Camera messages to RGB arrays, without cv_bridge (not available from PyPI for ROS 2).

Works on duck-typed messages: anything with the fields of sensor_msgs/Image (``height``, ``width``,
``encoding``, ``is_bigendian``, ``step``, ``data``) or sensor_msgs/CompressedImage (``format``, ``data``),
so rclpy messages and rosbags' deserialized objects both work. The result is an HxWx3 uint8 RGB array,
as :class:`~embodied_r_ros.frames.Frame` wants it. For ``rgb8`` without row padding it is a view of the
message's buffer (no copy).

Encodings (sensor_msgs/image_encodings names): rgb8, bgr8, rgba8, bgra8, mono8, rgb16, bgr16, rgba16,
bgra16, mono16 (16-bit is scaled to 8 by keeping the high byte; ``is_bigendian`` is honoured), yuv422 /
uyvy (UYVY byte order), yuv422_yuy2 / yuyv (YUYV), and the OpenCV aliases 8UC1, 8UC3, 8UC4, 16UC1. 8UC3
and 8UC4 carry no channel order and are taken as RGB(A), as cv_bridge passes them through. Anything else,
a wrong ``step``, a size mismatch or an empty image raises :class:`ImageConversionError`, whose ``reason``
is a short key for counting drops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

# OpenCV >= 4.10 decodes straight to RGB; older versions decode BGR and need a conversion.
_IMREAD_RGB = getattr(cv2, "IMREAD_COLOR_RGB", None)


class ImageConversionError(ValueError):
    """A camera message that cannot become an RGB image; ``reason`` is a short key (for drop counters)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class _Layout:
    """How one encoding stores a pixel: channels, bytes per channel, and the conversion to RGB."""

    channels: int
    bytes_per_channel: int
    to_rgb: int | None  # cv2.cvtColor code applied after scaling to 8 bits; None = already RGB


_LAYOUTS: dict[str, _Layout] = {
    "rgb8": _Layout(3, 1, None),
    "8uc3": _Layout(3, 1, None),
    "bgr8": _Layout(3, 1, cv2.COLOR_BGR2RGB),
    "rgba8": _Layout(4, 1, cv2.COLOR_RGBA2RGB),
    "8uc4": _Layout(4, 1, cv2.COLOR_RGBA2RGB),
    "bgra8": _Layout(4, 1, cv2.COLOR_BGRA2RGB),
    "mono8": _Layout(1, 1, cv2.COLOR_GRAY2RGB),
    "8uc1": _Layout(1, 1, cv2.COLOR_GRAY2RGB),
    "rgb16": _Layout(3, 2, None),
    "bgr16": _Layout(3, 2, cv2.COLOR_BGR2RGB),
    "rgba16": _Layout(4, 2, cv2.COLOR_RGBA2RGB),
    "bgra16": _Layout(4, 2, cv2.COLOR_BGRA2RGB),
    "mono16": _Layout(1, 2, cv2.COLOR_GRAY2RGB),
    "16uc1": _Layout(1, 2, cv2.COLOR_GRAY2RGB),
    # 4:2:2 packs two pixels in 4 bytes: 2 bytes per pixel, converted by OpenCV from (h, w, 2).
    "yuv422": _Layout(2, 1, cv2.COLOR_YUV2RGB_UYVY),
    "uyvy": _Layout(2, 1, cv2.COLOR_YUV2RGB_UYVY),
    "yuv422_yuy2": _Layout(2, 1, cv2.COLOR_YUV2RGB_YUY2),
    "yuyv": _Layout(2, 1, cv2.COLOR_YUV2RGB_YUY2),
}

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(sorted(_LAYOUTS))


def is_compressed(message: Any) -> bool:
    """True for a CompressedImage-like message (it has ``format`` and no ``encoding``)."""
    return hasattr(message, "format") and not hasattr(message, "encoding")


def message_to_rgb(message: Any) -> np.ndarray:
    """An Image or CompressedImage message as an HxWx3 uint8 RGB array (see the module docstring)."""
    if is_compressed(message):
        return compressed_to_rgb(message)
    return image_to_rgb(message)


def image_to_rgb(message: Any) -> np.ndarray:
    """A sensor_msgs/Image-like message as an HxWx3 uint8 RGB array; raises :class:`ImageConversionError`."""
    height, width, step = int(message.height), int(message.width), int(message.step)
    encoding = str(message.encoding)
    layout = _LAYOUTS.get(encoding.strip().lower())
    if layout is None:
        raise ImageConversionError(
            f"image encoding {encoding!r} is not supported; publish one of {', '.join(SUPPORTED_ENCODINGS)} "
            "(or a CompressedImage)",
            "unknown_encoding",
        )
    if height <= 0 or width <= 0:
        raise ImageConversionError(f"image is empty ({width}x{height} pixels)", "zero_size")
    if layout.channels == 2 and width % 2:
        raise ImageConversionError(
            f"{encoding} packs pixel pairs, so the width must be even, got {width}", "wrong_step"
        )
    row_bytes = width * layout.channels * layout.bytes_per_channel
    if step < row_bytes or step % layout.bytes_per_channel:
        raise ImageConversionError(
            f"image step {step} does not fit {width} pixels of {encoding} ({row_bytes} bytes per row at least"
            f"{', in whole 16-bit words' if layout.bytes_per_channel == 2 else ''})",
            "wrong_step",
        )
    data = message.data
    size = len(data)
    if size != step * height:
        raise ImageConversionError(
            f"image data holds {size} bytes but step x height = {step} x {height} = {step * height}",
            "size_mismatch",
        )
    if layout.bytes_per_channel == 1:
        rows = np.frombuffer(data, dtype=np.uint8).reshape(height, step)
    else:
        dtype = np.dtype(">u2" if message.is_bigendian else "<u2")
        # The high byte keeps the scale of a full-range 16-bit image (what mono16 means).
        rows = (np.frombuffer(data, dtype=dtype).reshape(height, step // 2) >> 8).astype(np.uint8)
    pixels = rows[:, : width * layout.channels].reshape(height, width, layout.channels)
    if layout.to_rgb is None:
        return pixels if step == row_bytes else np.ascontiguousarray(pixels)
    if layout.channels == 1:
        pixels = pixels[:, :, 0]
    return cv2.cvtColor(np.ascontiguousarray(pixels), layout.to_rgb)


def decode_rgb(encoded: np.ndarray) -> np.ndarray | None:
    """JPEG or PNG bytes (a uint8 array) as an HxWx3 uint8 RGB array; None when they do not decode."""
    if _IMREAD_RGB is not None:
        return cv2.imdecode(encoded, _IMREAD_RGB)
    decoded = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    return None if decoded is None else cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)


def compressed_to_rgb(message: Any) -> np.ndarray:
    """A sensor_msgs/CompressedImage-like message (JPEG or PNG) as an HxWx3 uint8 RGB array."""
    fmt = str(message.format)
    if "compresseddepth" in fmt.lower():
        raise ImageConversionError(
            f"compressed format {fmt!r} is a depth image; subscribe to the colour camera", "unknown_encoding"
        )
    buffer = np.frombuffer(message.data, dtype=np.uint8)
    if buffer.size == 0:
        raise ImageConversionError("compressed image holds no data", "zero_size")
    image = decode_rgb(buffer)
    if image is None:
        raise ImageConversionError(
            f"compressed image ({buffer.size} bytes, format {fmt!r}) could not be decoded as JPEG or PNG",
            "decode_failed",
        )
    return image


def rgb8_fields(image: np.ndarray) -> dict[str, Any]:
    """The fields of a sensor_msgs/Image holding ``image`` (HxWx3 uint8 RGB) as rgb8, without header."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ImageConversionError(
            f"expected an HxWx3 uint8 RGB image, got shape {image.shape} dtype {image.dtype}", "wrong_shape"
        )
    height, width = image.shape[:2]
    return {
        "height": height,
        "width": width,
        "encoding": "rgb8",
        "is_bigendian": 0,
        "step": width * 3,
        "data": np.ascontiguousarray(image).tobytes(),
    }
