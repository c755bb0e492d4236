"""Each distinct key frame is encoded once (within a query and across queries), with the same result as
feeding every image occurrence through the vision tower."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied_r_ros.backends import ChatMessage, load_backend
from embodied_r_ros.backends.image_cache import EncodedImageCache, image_key
from embodied_r_ros.config import model_config


def _images(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(120 + 8 * i, 160, 3), dtype=np.uint8) for i in range(count)]


@pytest.fixture()
def vlm(tiny_models_dir):
    backend = load_backend(
        model_config(str(tiny_models_dir / "vlm"), device="cpu", dtype="float32", image_cache_mb=64),
        vision=True,
    )
    yield backend
    backend.close()


def _pair_requests(images: list[np.ndarray]) -> list[list[ChatMessage]]:
    """The perception pattern: frame 0 alone, then each frame with its predecessor."""
    requests = [[ChatMessage("user", (images[0], "Describe the scene."))]]
    for j in range(1, len(images)):
        requests.append(
            [ChatMessage("user", ("Before:", images[j - 1], "After:", images[j], "What changed?"))]
        )
    return requests


def test_encoded_inputs_give_the_same_logits_as_pixel_inputs(vlm):
    requests = _pair_requests(_images(4))
    with torch.no_grad():
        from_pixels = vlm.model(**vlm.prepare(requests), use_cache=False).logits[:, -1]
        from_cache = vlm.model(**vlm.prepare(requests, encoded=True), use_cache=False).logits[:, -1]
    assert torch.allclose(from_pixels, from_cache, atol=1e-5, rtol=1e-5)
    # 7 image occurrences, 4 distinct images: the vision tower saw each once.
    assert (vlm.image_cache.misses, len(vlm.image_cache)) == (4, 4)


def test_generation_reuses_encodings_across_queries(vlm):
    images = _images(3, seed=1)
    first = vlm.generate_ids(_pair_requests(images), max_new_tokens=6, temperature=0.0)
    misses = vlm.image_cache.misses
    copies = [image.copy() for image in images]  # new arrays, same pixels: a second question, same window
    second = vlm.generate_ids(_pair_requests(copies), max_new_tokens=6, temperature=0.0)
    assert vlm.image_cache.misses == misses and first.token_ids == second.token_ids
    changed = copies[0].copy()
    changed[0, 0, 0] ^= 1
    vlm.encode_images([changed])
    assert vlm.image_cache.misses == misses + 1


def test_without_a_cache_results_are_the_same(tiny_models_dir, vlm):
    off = load_backend(
        model_config(str(tiny_models_dir / "vlm"), device="cpu", dtype="float32", image_cache_mb=0),
        vision=True,
    )
    requests = _pair_requests(_images(3, seed=2))
    assert (
        off.generate_ids(requests, max_new_tokens=6, temperature=0.0).token_ids
        == vlm.generate_ids(requests, max_new_tokens=6, temperature=0.0).token_ids
    )
    assert len(off.image_cache) == 0
    off.close()


def test_cache_stays_within_its_budget_and_can_be_off():
    embeddings = torch.zeros(100, 10)  # 4000 bytes each
    grid = torch.tensor([1, 10, 10])
    cache = EncodedImageCache(max_bytes=10_000)
    keys = [image_key(image) for image in _images(4, seed=3)]
    for key in keys:
        cache.put(key, embeddings, grid)
        assert cache.bytes_used <= 10_000
    assert len(cache) == 2 and cache.get(keys[0]) is None and cache.get(keys[3]) is not None
    off = EncodedImageCache(max_bytes=0)
    off.put(keys[0], embeddings, grid)
    assert len(off) == 0 and off.get(keys[0]) is None


def test_key_depends_on_shape_as_well_as_bytes():
    flat = np.zeros((4, 6, 3), np.uint8)
    assert image_key(flat) != image_key(flat.reshape(6, 4, 3))
    assert image_key(flat) == image_key(np.zeros((4, 6, 3), np.uint8))
