"""RobotHistory without ROS: frames, stamp jumps, poses and the key frames of a window."""

from __future__ import annotations

import pytest

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S, Frame, Pose
from embodied_r_ros.history import EmptyHistoryError, RobotHistory
from embodied_r_ros.keyframes import StreamingKeyFrameSelector
from embodied_r_ros.testing.synthetic_clip import synthetic_clip
from embodied_r_ros.windows import Window, WindowError

MS = NS_PER_S // 1000


def history(**buffer: object) -> RobotHistory:
    return RobotHistory(
        BufferConfig(**buffer), KeyFrameConfig(), jump_back_reset_s=5.0, odometry_max_gap_s=0.5
    )


@pytest.fixture(scope="module")
def clip():
    return synthetic_clip(seconds=12, fps=4)


def test_keyframes_of_a_window_are_the_selectors(clip):
    """The history decides exactly as a selector fed the same frames, for the whole stream and a window."""
    robot, selector = history(), StreamingKeyFrameSelector(KeyFrameConfig())
    decisions = [robot.add_frame(frame) for frame in clip.frames]
    kept = [selector.push(frame) for frame in clip.frames]
    assert all(d.taken for d in decisions)
    assert [d.keyframe for d in decisions] == [k is not None for k in kept]
    assert sum(d.stored for d in decisions) == len(robot.buffer) == 12  # one candidate a second

    whole = robot.keyframes(Window(), default_s=600.0)
    assert whole.newest_ns == clip.frames[-1].stamp_ns == whole.end_ns
    assert [k.frame.stamp_ns for k in whole.keyframes] == [
        k.frame.stamp_ns for k in selector.keyframes_in_window(whole.start_ns, whole.end_ns)
    ]
    start, end = clip.frames[8].stamp_ns, clip.frames[40].stamp_ns
    mid = robot.keyframes(Window(start_ns=start, end_ns=end), default_s=600.0)
    assert (mid.start_ns, mid.end_ns) == (start, end)
    assert [k.frame.stamp_ns for k in mid.keyframes] == [
        k.frame.stamp_ns for k in selector.keyframes_in_window(start, end)
    ]


def test_newest_keyframe_comes_as_stored(clip):
    """Every key frame, the newest too, is the buffer's downscaled copy (the pixels the VLM cache keys)."""
    robot = history(max_side=160, jpeg_quality=0)
    for frame in clip.frames:
        robot.add_frame(frame)
    found = robot.keyframes(Window(seconds=5.0), default_s=600.0)
    assert found.keyframes[-1].frame.stamp_ns == clip.frames[-1].stamp_ns
    assert {k.frame.image.shape for k in found.keyframes} == {(120, 160, 3)}


def test_empty_history_and_clear(clip):
    robot = history()
    with pytest.raises(EmptyHistoryError):
        robot.keyframes(Window(), default_s=10.0)
    for frame in clip.frames[:20]:
        robot.add_frame(frame)
    robot.add_pose(clip.frames[0].stamp_ns, Pose())
    frames, decisions = robot.clear()
    assert frames == 5 and decisions == 5  # candidates at 0, 1, 2, 3, 4 s
    assert robot.newest_ns is None and len(robot.poses) == 0 and robot.size().frames == 0
    with pytest.raises(EmptyHistoryError):
        robot.keyframes(Window(), default_s=10.0)


def test_window_outside_the_history_is_refused(clip):
    robot = history()
    for frame in clip.frames:
        robot.add_frame(frame)
    first, last = clip.frames[0].stamp_ns, clip.frames[-1].stamp_ns
    with pytest.raises(WindowError, match="future"):
        robot.keyframes(Window(start_ns=last + 10 * NS_PER_S, end_ns=last + 20 * NS_PER_S), 10.0)
    with pytest.raises(WindowError, match="before the oldest"):
        robot.keyframes(Window(start_ns=first - 10 * NS_PER_S, end_ns=last), 10.0)


def test_stamp_jump_is_dropped_until_it_persists(clip):
    """One stale frame is dropped and changes nothing; three in a row restart the history from them."""
    robot = history()
    for frame in clip.frames:
        robot.add_frame(frame)
    newest, stored = robot.newest_ns, len(robot.buffer)
    image = clip.frames[0].image
    back = newest - 100 * NS_PER_S
    stale = robot.add_frame(Frame(image, back))
    assert not stale.taken and stale.dropped == "stamp_jump" and stale.jump_s == pytest.approx(-100.0)
    assert robot.newest_ns == newest and len(robot.buffer) == stored

    robot.add_frame(Frame(image, back + 250 * MS))
    third = robot.add_frame(Frame(image, back + 500 * MS))
    assert third.taken and third.restarted and third.keyframe and third.stored
    assert robot.newest_ns == back + 500 * MS and len(robot.buffer) == 1
    assert robot.keyframes(Window(), default_s=600.0).start_ns == back + 500 * MS - 600 * NS_PER_S


def test_out_of_order_frame_is_dropped(clip):
    robot = history()
    for frame in clip.frames[:10]:
        robot.add_frame(frame)
    late = robot.add_frame(Frame(clip.frames[0].image, clip.frames[5].stamp_ns))
    assert not late.taken and late.dropped == "out_of_order"
    assert robot.newest_ns == clip.frames[9].stamp_ns


def test_frame_too_large_for_the_buffer_still_counts(clip):
    """A candidate the buffer refuses is reported, and the stream goes on (it is the newest frame)."""
    robot = history(memory_mb=0.01, jpeg_quality=0)  # 10 kB: not one 320x240 raw frame
    decision = robot.add_frame(clip.frames[0])
    assert decision.taken and not decision.stored and "memory" in decision.store_error
    assert robot.newest_ns == clip.frames[0].stamp_ns


def test_keyframes_get_the_pose_at_their_stamp(clip):
    robot = history()
    for frame in clip.frames:
        robot.add_frame(frame)
    for frame in clip.frames:  # odometry at the camera's stamps, 1 m a second along x
        t = (frame.stamp_ns - clip.frames[0].stamp_ns) / NS_PER_S
        assert robot.add_pose(frame.stamp_ns + 1, Pose(position=(t, 0.0, 0.0)))
    for keyframe in robot.keyframes(Window(), default_s=600.0).keyframes:
        t = (keyframe.frame.stamp_ns - clip.frames[0].stamp_ns) / NS_PER_S
        assert keyframe.frame.pose is not None
        assert keyframe.frame.pose.position[0] == pytest.approx(t, abs=1e-6)


def test_odometry_that_jumps_back_starts_anew(clip):
    """A bag loop restarts the odometry: older stamps replace the poses instead of being ignored."""
    robot = history()
    start = clip.frames[0].stamp_ns
    for i in range(20):
        robot.add_pose(start + i * 100 * MS, Pose(position=(float(i), 0.0, 0.0)))
    assert not robot.add_pose(start + 500 * MS, Pose())  # a little back: ignored, as PoseHistory does
    assert robot.add_pose(start - 60 * NS_PER_S, Pose(position=(-1.0, 0.0, 0.0)))  # far back: new stream
    assert len(robot.poses) == 1


def test_size_lets_go_of_keyframes_older_than_the_buffer(clip):
    robot = history(history_s=3.0)
    for frame in clip.frames:
        robot.add_frame(frame)
    held = robot.size()
    assert held.frames == len(robot.buffer) <= 4 and held.candidates == len(robot.selector)
    assert 1 <= held.keyframes <= held.frames and held.memory_bytes > 0
    stamps = [k.frame.stamp_ns for k in robot.keyframes(Window(), default_s=600.0).keyframes]
    # history_s is counted from the newest candidate (the 1 s grid), so one candidate period more
    assert stamps and min(stamps) >= clip.frames[-1].stamp_ns - 4 * NS_PER_S
