"""Camera messages to RGB: every supported encoding, row padding, byte order, and clear errors."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from embodied_r_ros.image_conversion import (
    ImageConversionError,
    compressed_to_rgb,
    image_to_rgb,
    message_to_rgb,
    rgb8_fields,
)

RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)


def image_message(pixels: np.ndarray, encoding: str, *, step: int | None = None, bigendian: int = 0, pad=b""):
    """An Image-like message of ``pixels`` (HxWxC or HxW, uint8/uint16) stored as given, rows padded."""
    h, w = pixels.shape[:2]
    rows = pixels.reshape(h, -1)
    raw = rows.astype(rows.dtype.newbyteorder(">" if bigendian else "<")).tobytes()
    row_bytes = len(raw) // h
    step = step if step is not None else row_bytes + len(pad)
    data = b"".join(raw[i * row_bytes : (i + 1) * row_bytes] + pad for i in range(h))
    return SimpleNamespace(height=h, width=w, encoding=encoding, is_bigendian=bigendian, step=step, data=data)


@pytest.mark.parametrize(
    ("encoding", "stored"),
    [
        ("rgb8", RGB),
        ("8UC3", RGB),
        ("bgr8", RGB[:, :, ::-1]),
        ("rgba8", np.dstack([RGB, np.full(RGB.shape[:2], 9, np.uint8)])),
        ("bgra8", np.dstack([RGB[:, :, ::-1], np.full(RGB.shape[:2], 9, np.uint8)])),
        ("8UC4", np.dstack([RGB, np.zeros(RGB.shape[:2], np.uint8)])),
    ],
)
def test_colour_encodings_give_rgb(encoding, stored):
    assert np.array_equal(image_to_rgb(image_message(np.ascontiguousarray(stored), encoding)), RGB)


def test_rgb8_without_padding_is_a_view_of_the_message_buffer():
    data = bytearray(RGB.tobytes())
    message = SimpleNamespace(height=6, width=8, encoding="rgb8", is_bigendian=0, step=24, data=data)
    image = image_to_rgb(message)
    assert np.shares_memory(image, np.frombuffer(data, np.uint8))
    assert image.shape == (6, 8, 3) and image.dtype == np.uint8


@pytest.mark.parametrize("encoding", ["mono8", "8UC1"])
def test_grey_is_replicated(encoding):
    grey = RGB[:, :, 0].copy()
    image = image_to_rgb(image_message(grey, encoding))
    assert image.shape == (6, 8, 3) and all(np.array_equal(image[:, :, c], grey) for c in range(3))


@pytest.mark.parametrize("bigendian", [0, 1])
@pytest.mark.parametrize("encoding", ["mono16", "16UC1"])
def test_sixteen_bit_grey_keeps_the_high_byte_in_either_byte_order(encoding, bigendian):
    grey16 = RNG.integers(0, 65536, size=(5, 7), dtype=np.uint16)
    image = image_to_rgb(image_message(grey16, encoding, bigendian=bigendian))
    assert np.array_equal(image[:, :, 1], (grey16 >> 8).astype(np.uint8))


def test_sixteen_bit_colour():
    rgb16 = RGB.astype(np.uint16) * 257  # full-range 16-bit
    assert np.array_equal(image_to_rgb(image_message(rgb16, "rgb16")), RGB)
    assert np.array_equal(image_to_rgb(image_message(np.ascontiguousarray(rgb16[:, :, ::-1]), "bgr16")), RGB)


@pytest.mark.parametrize(
    ("encoding", "pair"),
    [
        ("yuv422", [128, 200, 128, 50]),
        ("uyvy", [128, 200, 128, 50]),
        ("yuv422_yuy2", [200, 128, 50, 128]),
        ("yuyv", [200, 128, 50, 128]),
    ],
)
def test_yuv422_byte_orders(encoding, pair):
    # Two grey pixels per 4 bytes (U = V = 128): luma 200 then 50, read in the encoding's byte order.
    packed = np.tile(np.array(pair, np.uint8), (2, 2)).reshape(2, 8)
    message = SimpleNamespace(
        height=2, width=4, encoding=encoding, is_bigendian=0, step=8, data=packed.tobytes()
    )
    image = image_to_rgb(message).astype(int)
    assert image.shape == (2, 4, 3)
    assert np.all(np.abs(image[:, 0::2] - 200) <= 30) and np.all(np.abs(image[:, 1::2] - 50) <= 30)


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "mono8", "mono16"])
def test_padded_rows_are_skipped(encoding):
    source = {
        "rgb8": RGB,
        "bgr8": np.ascontiguousarray(RGB[:, :, ::-1]),
        "mono8": RGB[:, :, 0].copy(),
        "mono16": RGB[:, :, 0].astype(np.uint16) << 8,
    }[encoding]
    padded = image_to_rgb(image_message(source, encoding, pad=b"\xff" * 6))
    assert np.array_equal(padded, image_to_rgb(image_message(source, encoding)))


@pytest.mark.parametrize(
    ("change", "reason", "words"),
    [
        (dict(encoding="32FC1"), "unknown_encoding", "32FC1"),
        (dict(encoding="bayer_rggb8"), "unknown_encoding", "not supported"),
        (dict(step=10), "wrong_step", "step 10"),
        (dict(data=RGB.tobytes()[:-3]), "size_mismatch", "141 bytes"),
        (dict(height=0, data=b"", step=24), "zero_size", "empty"),
        (dict(width=0, step=0), "zero_size", "empty"),
    ],
)
def test_malformed_images_raise_with_a_reason(change, reason, words):
    message = image_message(RGB, "rgb8")
    for key, value in change.items():
        setattr(message, key, value)
    with pytest.raises(ImageConversionError, match=words) as info:
        image_to_rgb(message)
    assert info.value.reason == reason


def test_sixteen_bit_step_must_hold_whole_words_and_yuv_width_must_be_even():
    grey16 = np.zeros((2, 3), np.uint16)
    with pytest.raises(ImageConversionError) as info:
        image_to_rgb(image_message(grey16, "mono16", step=7, pad=b"\x00"))
    assert info.value.reason == "wrong_step"
    odd = SimpleNamespace(height=1, width=3, encoding="uyvy", is_bigendian=0, step=6, data=bytes(6))
    with pytest.raises(ImageConversionError, match="even"):
        image_to_rgb(odd)


def test_compressed_jpeg_and_png():
    smooth = cv2.resize(RGB, (64, 48), interpolation=cv2.INTER_LINEAR)
    png = cv2.imencode(".png", cv2.cvtColor(smooth, cv2.COLOR_RGB2BGR))[1].tobytes()
    assert np.array_equal(compressed_to_rgb(SimpleNamespace(format="png", data=png)), smooth)
    jpeg = cv2.imencode(".jpg", cv2.cvtColor(smooth, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])[1]
    decoded = message_to_rgb(SimpleNamespace(format="rgb8; jpeg compressed bgr8", data=jpeg.tobytes()))
    assert decoded.shape == (48, 64, 3) and np.abs(decoded.astype(int) - smooth).mean() < 8


@pytest.mark.parametrize(
    ("fmt", "data", "reason"),
    [
        ("jpeg", b"not a jpeg at all", "decode_failed"),
        ("jpeg", b"", "zero_size"),
        ("16UC1; compressedDepth png", b"\x00" * 20, "unknown_encoding"),
    ],
)
def test_bad_compressed_images(fmt, data, reason):
    with pytest.raises(ImageConversionError) as info:
        compressed_to_rgb(SimpleNamespace(format=fmt, data=data))
    assert info.value.reason == reason


def test_rosbags_messages_and_rclpy_messages_convert():
    from rosbags.typesys import Stores, get_typestore
    from sensor_msgs.msg import Image

    types = get_typestore(Stores.ROS2_KILTED).types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=2), frame_id=""
    )
    fields = rgb8_fields(RGB)
    bag_message = types["sensor_msgs/msg/Image"](
        header=header, **{**fields, "data": np.frombuffer(fields["data"], np.uint8)}
    )
    assert np.array_equal(message_to_rgb(bag_message), RGB)
    assert np.array_equal(message_to_rgb(Image(**fields)), RGB)
    with pytest.raises(ImageConversionError, match="HxWx3"):
        rgb8_fields(RGB[:, :, 0])
