"""The generated ROS interfaces are the public contract: they import, carry the documented fields and
survive serialization (real rosidl type support, no DDS needed)."""

import math

import rclpy.serialization as rclpy_serialization


def test_service_action_and_message_fields():
    from embodied_r_ros.action import AnswerSpatial
    from embodied_r_ros.msg import SpatialAnswer
    from embodied_r_ros.srv import AskSpatial

    request = AskSpatial.Request(question="Which object did I pass first?", options=["chair", "door"])
    assert request.window_seconds == 0.0
    response = AskSpatial.Response()
    assert isinstance(response.answer, SpatialAnswer) and response.success is False
    goal = AnswerSpatial.Goal(question="q", options=[], window_seconds=5.0)
    assert goal.window_seconds == 5.0
    result = AnswerSpatial.Result()
    assert hasattr(result, "success") and hasattr(result, "message") and hasattr(result, "answer")
    feedback = AnswerSpatial.Feedback(stage="perception", progress=0.5)
    assert feedback.stage == "perception"
    for name in (
        "header",
        "query_id",
        "success",
        "message",
        "question",
        "options",
        "answer",
        "choice",
        "value",
        "reasoning",
        "well_formed",
        "completion",
        "notes",
        "keyframe_stamps",
        "keyframe_descriptions",
        "perception_seconds",
        "reasoning_seconds",
    ):
        assert hasattr(SpatialAnswer(), name), name


def test_spatial_answer_round_trip():
    from builtin_interfaces.msg import Time
    from embodied_r_ros.msg import SpatialAnswer

    message = SpatialAnswer(
        query_id="q1",
        question="How far is the door?",
        options=[],
        answer="2.5 m",
        choice="",
        value=2.5,
        reasoning="the door is ahead",
        well_formed=True,
        keyframe_stamps=[Time(sec=1, nanosec=5), Time(sec=2, nanosec=0)],
        keyframe_descriptions=["a door ahead", "After move forward: the door is closer"],
        perception_seconds=0.5,
        reasoning_seconds=0.25,
    )
    data = rclpy_serialization.serialize_message(message)
    back = rclpy_serialization.deserialize_message(data, SpatialAnswer)
    assert back == message
    nan = SpatialAnswer(value=math.nan)
    assert math.isnan(
        rclpy_serialization.deserialize_message(
            rclpy_serialization.serialize_message(nan), SpatialAnswer
        ).value
    )
