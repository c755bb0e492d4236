"""Frames reject bad images and stamps with a message that names the problem and the fix."""

import numpy as np
import pytest

from embodied_r_ros.frames import Clip, Frame, FrameError, Pose


def test_a_good_frame():
    frame = Frame(np.zeros((48, 64, 3), np.uint8), 1_500_000_000, Pose((1.0, 2.0, 0.0)))
    assert (frame.width, frame.height, frame.stamp_s) == (64, 48, 1.5)


@pytest.mark.parametrize(
    "image, words",
    [
        (np.zeros((48, 64), np.uint8), ["HxWx3", "grey"]),
        (np.zeros((48, 64, 4), np.uint8), ["HxWx3", "RGBA"]),
        (np.zeros((0, 64, 3), np.uint8), ["empty"]),
        (np.zeros((48, 64, 3), np.uint16), ["uint8", "16-bit"]),
        (np.zeros((48, 64, 3), np.float32), ["uint8"]),
        ([[0, 0, 0]], ["numpy array", "list"]),
        (None, ["numpy array", "NoneType"]),
    ],
)
def test_bad_images_are_named(image, words):
    with pytest.raises(FrameError) as info:
        Frame(image, 0)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("stamp, words", [(1.5, ["int", "nanoseconds"]), (-1, [">= 0"]), (True, ["int"])])
def test_bad_stamps_are_named(stamp, words):
    with pytest.raises(FrameError) as info:
        Frame(np.zeros((4, 4, 3), np.uint8), stamp)
    for word in words:
        assert word in str(info.value)


def test_clip_order_and_duration():
    image = np.zeros((4, 4, 3), np.uint8)
    clip = Clip((Frame(image, 0), Frame(image, 2_000_000_000)))
    assert len(clip) == 2 and clip.duration_s == 2.0
    assert Clip().duration_s == 0.0
    with pytest.raises(FrameError, match="ordered by stamp"):
        Clip((Frame(image, 5), Frame(image, 1)))
