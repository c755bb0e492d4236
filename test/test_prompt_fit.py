"""Prompt fitting (issue 29, point 6): a wide window is answered from fewer key frames, never refused.

The rule is tested with a measure that counts words (the prompt's "tokens"), then end to end with the tiny
models and an LM whose context is too small for the window's key frames.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from embodied_r_ros.backends import PromptTooLongError, load_backend
from embodied_r_ros.backends.base import PromptRoom
from embodied_r_ros.config import model_config
from embodied_r_ros.frames import Frame, Pose
from embodied_r_ros.keyframes import KeyFrame, select_keyframes
from embodied_r_ros.memory.sightings import add_summary
from embodied_r_ros.perception import Description, Perceiver, odometry_motion
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.reasoning.messages import Reasoner, reasoning_messages
from embodied_r_ros.reasoning.prompt_fit import ELLIPSIS, cut_observations, drop_order, fit_prompt, thin
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

QUESTION = "Which way did I turn?"
OPTIONS = ["left", "right"]
IMAGE = np.zeros((4, 4, 3), dtype=np.uint8)


class WordMeasure:
    """A context of ``limit`` words; counts its calls."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.calls = 0

    def __call__(self, chat) -> PromptRoom | None:
        self.calls += 1
        if self.limit is None:
            return None
        return PromptRoom(words(chat), self.limit)


def words(chat) -> int:
    return sum(len(message.joined_text.split()) for message in chat)


def prompt_words(descriptions, question=QUESTION) -> int:
    return words(reasoning_messages(descriptions, question, OPTIONS))


def make_query(overlaps, *, poses=True, observation_words=10, labels=None):
    """Key frames with these overlaps (one per frame, None for the first) and their descriptions."""
    keyframes, descriptions = [], []
    for i, overlap in enumerate(overlaps):
        pose = Pose(position=(float(i), 0.0, 0.0)) if poses else None
        keyframes.append(KeyFrame(Frame(IMAGE, 1_000 + i, pose), i, overlap))
    for i, keyframe in enumerate(keyframes):
        observation = " ".join(f"f{i}w{k}" for k in range(observation_words))
        if i == 0:
            action, source = None, "none"
        elif poses:
            action, source = f"I {odometry_motion(keyframes[i - 1], keyframe)}", "odometry"
        else:
            action = labels[i] if labels else "move forward"
            source = "vlm" if action else "none"
        descriptions.append(Description(i, keyframe.frame.stamp_ns, action, observation, observation, source))
    return keyframes, descriptions


def fit(descriptions, keyframes, measure, question=QUESTION):
    return fit_prompt(descriptions, keyframes, question, OPTIONS, measure, min_keyframes=4)


def test_a_prompt_that_fits_or_cannot_be_measured_is_left_alone():
    keyframes, descriptions = make_query([None, 0.3, 0.4, 0.2, 0.1, 0.3])
    measure = WordMeasure(prompt_words(descriptions))
    fitted = fit(descriptions, keyframes, measure)
    assert fitted.descriptions == descriptions and fitted.note == "" and measure.calls == 1
    fitted = fit(descriptions, keyframes, WordMeasure(None))
    assert fitted.descriptions == descriptions and fitted.note == ""


def test_the_most_overlapping_inner_frames_go_first_and_only_as_many_as_needed():
    overlaps = [None, 0.30, 0.45, 0.10, None, 0.40, 0.20, 0.49]  # the last overlaps most: it stays
    keyframes, descriptions = make_query(overlaps)
    assert drop_order(keyframes) == [2, 5, 1, 6, 3, 4]  # unknown overlap (matching failed) comes last
    full = prompt_words(descriptions)
    limit = full - 20  # each frame's line is about 20 words: two must go
    fitted = fit(descriptions, keyframes, WordMeasure(limit))
    stamps = [d.stamp_ns for d in fitted.descriptions]
    assert stamps == [1_000 + i for i in (0, 1, 3, 4, 6, 7)]  # 0.45 and 0.40 dropped
    assert prompt_words(fitted.descriptions) <= limit
    # The fewest drops: keeping the 0.40 frame would not fit.
    one_fewer = [d for d in descriptions if d.stamp_ns != 1_002]
    assert prompt_words(one_fewer) > limit
    assert [d.index for d in fitted.descriptions] == list(range(6))  # renumbered as the prompt's frames
    assert fitted.note == (
        f"fitted the prompt to the LM's context ({full} -> {prompt_words(fitted.descriptions)} tokens, "
        f"room for {limit}): 8 -> 6 key frames, dropping the most overlapping"
    )


def test_first_and_last_frames_stay_and_never_fewer_than_four():
    overlaps = [None, 0.1, 0.2, 0.3, 0.4, 0.45, 0.35, 0.25, 0.15, 0.9]
    keyframes, descriptions = make_query(overlaps)
    four = [descriptions[i] for i in (0, 1, 8, 9)]  # the least overlapping inner frames: 0.1, 0.15
    limit = prompt_words(four) - 10  # four frames do not fit with whole observations
    fitted = fit(descriptions, keyframes, WordMeasure(limit))
    assert [d.stamp_ns for d in fitted.descriptions] == [1_000, 1_001, 1_008, 1_009]
    assert prompt_words(fitted.descriptions) <= limit
    assert "10 -> 4 key frames, dropping the most overlapping; observations cut to at most " in fitted.note


def test_a_dropped_motion_folds_into_the_next_kept_frame_from_odometry():
    keyframes, descriptions = make_query([None, 0.2, 0.48, 0.47, 0.1, 0.3])
    limit = prompt_words(descriptions) - 30  # two frames go: 0.48 and 0.47 (positions 2, 3)
    fitted = fit(descriptions, keyframes, WordMeasure(limit))
    assert [d.stamp_ns for d in fitted.descriptions] == [1_000, 1_001, 1_004, 1_005]
    folded = fitted.descriptions[2]
    assert folded.action == f"I {odometry_motion(keyframes[1], keyframes[4])}" == "I moved forward 3.0 m"
    assert folded.action_source == "odometry"
    assert folded.observation == descriptions[4].observation and folded.raw == descriptions[4].raw
    assert fitted.descriptions[3] == replace(descriptions[5], index=3)  # nothing dropped before it


def test_without_poses_the_labels_of_the_dropped_steps_are_joined():
    labels = [None, "move forward", "rotate left", None, "move forward", "rotate right"]
    keyframes, descriptions = make_query([None, 0.2, 0.48, 0.47, 0.1, 0.3], poses=False, labels=labels)
    fitted = fit(descriptions, keyframes, WordMeasure(prompt_words(descriptions) - 30))
    folded = fitted.descriptions[2]
    # Frame 3 had no readable action: nothing of it is invented.
    assert folded.action == "rotate left, then move forward" and folded.action_source == "vlm"
    assert (
        "After rotate left, then move forward, Observe:"
        in reasoning_messages(fitted.descriptions, QUESTION, OPTIONS)[1].joined_text
    )


def test_observations_are_cut_to_the_most_words_that_fit():
    keyframes, descriptions = make_query([None, 0.2, 0.3, 0.1], observation_words=40)
    limit = prompt_words(descriptions) - 50
    measure = WordMeasure(limit)
    fitted = fit(descriptions, keyframes, measure)
    assert len(fitted.descriptions) == 4  # no frame can go: only the observations get shorter
    cut = fitted.descriptions[1].observation.split()
    assert cut[-1] == ELLIPSIS and cut[:-1] == descriptions[1].observation.split()[: len(cut) - 1]
    kept = len(cut) - 1
    assert all(len(d.observation.split()) == kept + 1 for d in fitted.descriptions)
    assert prompt_words(fitted.descriptions) <= limit
    assert prompt_words(cut_observations(descriptions, kept + 1)) > limit  # one word more would not fit
    assert fitted.note.endswith(f"observations cut to at most {kept} words each")
    assert "key frames" not in fitted.note
    assert measure.calls <= 10  # a binary search, not a word-by-word walk


def test_thirty_two_frames_are_searched_in_a_few_measurements():
    rng = np.random.default_rng(0)
    overlaps = [None, *rng.uniform(0.0, 0.5, 31).tolist()]
    keyframes, descriptions = make_query(overlaps)
    measure = WordMeasure(prompt_words(descriptions) // 2)
    fitted = fit(descriptions, keyframes, measure)
    assert 4 < len(fitted.descriptions) < 32 and fitted.note
    assert measure.calls <= 9  # 1 + 1 + ceil(log2(28)) + the final measurement


def test_a_question_too_long_for_any_prompt_is_left_to_the_backend(lm):
    keyframes, descriptions = make_query([None, 0.2, 0.3, 0.1, 0.4, 0.2])
    question = "Which way did I turn? " * 200
    fitted = fit(descriptions, keyframes, WordMeasure(500), question=question)
    assert fitted.descriptions == descriptions and fitted.note == ""
    # ... where it raises at generate, naming the prompt's size.
    small = fit_prompt(descriptions, keyframes, question, OPTIONS, lm.prompt_room, min_keyframes=4)
    assert small.descriptions == descriptions and small.note == ""
    with pytest.raises(PromptTooLongError, match="exceeds the"):
        Reasoner(lm).answer(small.descriptions, question, OPTIONS)


def test_a_memory_s_tally_is_measured_in_place_and_never_cut():
    keyframes, descriptions = make_query([None, 0.30, 0.45, 0.10, None, 0.40, 0.20, 0.49])
    tally = "From every sighting in my memory: 12 red chairs and 9 blue chairs, 21 in all."
    limit = prompt_words(descriptions)  # the frames alone fit; with the tally after the first, they do not
    fitted = fit_prompt(descriptions, keyframes, QUESTION, OPTIONS, WordMeasure(limit), min_keyframes=4,
                        summary=tally)  # fmt: skip
    assert 4 <= len(fitted.descriptions) < len(descriptions) and fitted.note
    assert prompt_words(add_summary(fitted.descriptions, tally)) <= limit
    assert tally not in fitted.descriptions[0].observation  # the caller puts it there
    # A tally four frames cannot hold either: the observations are cut, the tally is not.
    four, parts, long_tally = thin(descriptions, keyframes, {1, 2, 5, 6}), [], tally
    while prompt_words(add_summary(four, long_tally)) <= limit:
        parts.append(f"{len(parts) + 2} red chairs")
        long_tally = f"From every sighting in my memory: {', '.join(parts)}, 99 in all."
    fitted = fit_prompt(descriptions, keyframes, QUESTION, OPTIONS, WordMeasure(limit), min_keyframes=4,
                        summary=long_tally)  # fmt: skip
    assert len(fitted.descriptions) == 4 and "observations cut to at most" in fitted.note
    reasoned = add_summary(fitted.descriptions, long_tally)
    assert prompt_words(reasoned) <= limit and reasoned[0].observation.endswith(long_tally)


def test_descriptions_and_key_frames_must_pair():
    keyframes, descriptions = make_query([None, 0.2, 0.3, 0.1])
    with pytest.raises(ValueError, match="one description per key frame, got 3 descriptions for 4"):
        fit(descriptions[:3], keyframes, WordMeasure(10))


# ---------------------------------------------------------------------------------------------------
# End to end: the tiny models, an LM whose context cannot hold the window's key frames

MAX_NEW = 12


def _common():
    return dict(device="cpu", dtype="float32", max_new_tokens=MAX_NEW)


def _lm_with_context(tiny_models_dir: Path, where: Path, context: int):
    """A copy of the tiny LM whose config.json gives a context of ``context`` tokens, loaded."""
    copy = shutil.copytree(tiny_models_dir / "lm", where)
    config_file = copy / "config.json"
    config = json.loads(config_file.read_text())
    config["max_position_embeddings"] = context
    config_file.write_text(json.dumps(config))
    return load_backend(model_config(str(copy), **_common()), vision=False)


@pytest.fixture(scope="module")
def vlm(tiny_models_dir):
    backend = load_backend(model_config(str(tiny_models_dir / "vlm"), **_common()), vision=True)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def window(vlm):
    """A wide window's key frames (more than four) and their descriptions."""
    clip = synthetic_clip(seconds=12.0, fps=2.0, size=(160, 120))
    keyframes = select_keyframes(clip.frames)
    assert len(keyframes) > 5
    return keyframes, Perceiver(vlm).describe(keyframes, QUESTION, OPTIONS)


@pytest.fixture(scope="module")
def lm(tiny_models_dir, tmp_path_factory, window):
    """The tiny LM with a context that holds four key frames of ``window`` but not all of them."""
    keyframes, descriptions = window
    full = load_backend(model_config(str(tiny_models_dir / "lm"), **_common()), vision=False)
    all_tokens = full.prompt_room(reasoning_messages(descriptions, QUESTION, OPTIONS)).tokens
    four_tokens = full.prompt_room(reasoning_messages(descriptions[:4], QUESTION, OPTIONS)).tokens
    full.close()
    context = (all_tokens + four_tokens) // 2 + MAX_NEW
    backend = _lm_with_context(tiny_models_dir, tmp_path_factory.mktemp("small") / "lm", context)
    assert backend.context_tokens() == context
    yield backend
    backend.close()


def test_a_wide_window_is_answered_from_fewer_key_frames_with_a_note(vlm, lm, window):
    keyframes, descriptions = window
    with pytest.raises(PromptTooLongError):  # what the node answered before: a refusal
        Reasoner(lm).answer(descriptions, QUESTION, OPTIONS)

    pipeline = EmbodiedR(Perceiver(vlm), Reasoner(lm))
    answer = pipeline.answer(QUESTION, OPTIONS, keyframes=keyframes)
    kept = len(answer.descriptions)
    assert 4 <= kept < len(keyframes)
    assert answer.completion and answer.choice in (None, "A", "B")
    (note,) = answer.notes
    assert note.startswith("fitted the prompt to the LM's context (")
    assert f"{len(keyframes)} -> {kept} key frames, dropping the most overlapping" in note
    # The answer holds what was reasoned over: the first and the last key frame among them.
    stamps = [k.frame.stamp_ns for k in keyframes]
    assert answer.keyframe_stamps_ns == [d.stamp_ns for d in answer.descriptions]
    assert answer.keyframe_stamps_ns[0] == stamps[0] and answer.keyframe_stamps_ns[-1] == stamps[-1]
    assert set(answer.keyframe_stamps_ns) < set(stamps)
    assert [d.index for d in answer.descriptions] == list(range(kept))
    room = lm.prompt_room(reasoning_messages(answer.descriptions, QUESTION, OPTIONS))
    assert room.fits


def test_a_count_s_tally_is_fitted_into_the_context_with_the_key_frames(vlm, lm, window):
    keyframes, _ = window
    few = [keyframes[0], keyframes[1], keyframes[-1]]  # they fit (see below), with no tally
    described = Perceiver(vlm).describe(few, QUESTION, OPTIONS)
    parts, tally = [], ""
    while lm.prompt_room(reasoning_messages(add_summary(described, tally), QUESTION, OPTIONS)).fits:
        parts.append(f"{len(parts) + 2} red chairs")
        tally = f"From every sighting in my memory: {', '.join(parts)}, 99 in all."
    with pytest.raises(PromptTooLongError):  # what the pipeline sent before: the tally after the fitting
        Reasoner(lm).answer(add_summary(described, tally), QUESTION, OPTIONS)

    answer = EmbodiedR(Perceiver(vlm), Reasoner(lm)).answer(QUESTION, OPTIONS, keyframes=few, summary=tally)
    (note,) = answer.notes
    assert "observations cut to at most" in note  # three frames: none may go, the observations shrink
    assert answer.descriptions[0].observation.endswith(tally)  # the tally whole, where it belongs
    assert lm.prompt_room(reasoning_messages(answer.descriptions, QUESTION, OPTIONS)).fits


def test_a_window_that_fits_gets_no_note(vlm, lm, window):
    keyframes, _ = window
    few = [keyframes[0], keyframes[1], keyframes[-1]]
    answer = EmbodiedR(Perceiver(vlm), Reasoner(lm)).answer(QUESTION, OPTIONS, keyframes=few)
    assert answer.notes == [] and answer.keyframe_stamps_ns == [k.frame.stamp_ns for k in few]
