"""Model backends on the tiny offline models: batching, images, LoRA, the HTTP client, and clear errors."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from embodied_r_ros.backends import (
    BackendError,
    ChatMessage,
    GenerationBackend,
    ModelNotFoundError,
    OpenAIBackend,
    PromptTooLongError,
    load_backend,
    resolve_model_dir,
)
from embodied_r_ros.backends.transformers_backend import TransformersBackend
from embodied_r_ros.config import ModelConfig, model_config

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_NEW = 8
NEAR_TIE = 1e-3  # a top-2 logit gap below this may flip under batching noise (~1e-6)


def _image(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth RGB image (JPEG keeps it close), different per seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    channels = [
        127
        + 120 * np.sin(x / (5 + 20 * rng.random()) + rng.random() * 6) * np.cos(y / (5 + 20 * rng.random()))
        for _ in range(3)
    ]
    return np.clip(np.stack(channels, -1), 0, 255).astype(np.uint8)


def _user(*parts: Any) -> ChatMessage:
    return ChatMessage("user", tuple(parts))


@pytest.fixture(scope="module")
def vlm(tiny_models_dir: Path) -> TransformersBackend:
    backend = load_backend(
        ModelConfig(model=str(tiny_models_dir / "vlm"), max_new_tokens=MAX_NEW), vision=True
    )
    assert isinstance(backend, TransformersBackend)
    return backend


@pytest.fixture(scope="module")
def lm(tiny_models_dir: Path) -> TransformersBackend:
    backend = load_backend(
        ModelConfig(model=str(tiny_models_dir / "lm"), max_new_tokens=MAX_NEW), vision=False
    )
    assert isinstance(backend, TransformersBackend)
    return backend


def _vision_requests() -> list[list[ChatMessage]]:
    system = ChatMessage.text("system", "You describe what a robot sees.")
    return [
        [system, _user(_image(120, 160, 1), "Describe the scene around the agent.")],
        [_user("Frame 0:", _image(200, 100, 2), "Frame 1:", _image(90, 300, 3), "Which action was taken?")],
        [system, _user("Only one frame here, a larger one: ", _image(240, 320, 4))],
        [_user(_image(64, 64, 5), _image(300, 200, 6), "Two frames; where is the red chair now?")],
        [system, _user("A text-only turn in the same batch: which way is the door?")],
    ]


# --- transformers: VLM --------------------------------------------------------------------------


def test_load_backend_picks_the_backend_and_follows_the_protocol(vlm, lm):
    assert isinstance(vlm, GenerationBackend) and vlm.supports_images
    assert isinstance(lm, GenerationBackend) and not lm.supports_images
    remote = load_backend(ModelConfig(model="served-name", backend="openai"), vision=True)
    assert isinstance(remote, OpenAIBackend) and isinstance(remote, GenerationBackend)
    assert remote.supports_images
    assert vlm.dtype == torch.float32 and vlm.device.type == "cpu"


def test_vlm_inputs_expand_images_and_mark_them_for_3d_positions(vlm):
    requests = _vision_requests()
    inputs = vlm.prepare(requests)
    grid = inputs["image_grid_thw"]
    assert grid.shape == (6, 3)
    per_image = (grid.prod(-1) // 4).tolist()
    marked = inputs["mm_token_type_ids"].sum(-1).tolist()
    assert marked == [per_image[0], per_image[1] + per_image[2], per_image[3], per_image[4] + per_image[5], 0]
    assert int(inputs["pixel_values"].shape[0]) == int(grid.prod(-1).sum())
    # Left padding: every row ends with the real prompt; pads (mask 0) come first.
    mask = inputs["attention_mask"]
    assert bool(mask[:, -1].all()) and not bool(mask.all())
    assert all(bool((row.cumsum(0) > 0).eq(row.bool()).all()) for row in mask)

    with torch.no_grad():
        with_3d = vlm.model(**inputs).logits[:, -1]
        text_positions = {k: v for k, v in inputs.items() if k != "mm_token_type_ids"}
        without = vlm.model(**text_positions).logits[:, -1]
    # Without the token types the model quietly falls back to 1D positions: a different result.
    assert not torch.allclose(with_3d, without, atol=1e-3)


def test_vlm_output_depends_on_the_image(vlm):
    same_text = "Describe the scene."
    logits = vlm.first_step_logits(
        [[_user(_image(120, 160, 11), same_text)], [_user(_image(120, 160, 12), same_text)]]
    )
    assert (logits[0] - logits[1]).abs().max() > 1e-2


def _assert_same_or_near_tie(single_ids, single_logits, batched_ids, label):
    if single_ids == batched_ids:
        return
    k = next((i for i, (a, b) in enumerate(zip(single_ids, batched_ids, strict=False)) if a != b), None)
    assert k is not None, f"{label}: one output is a prefix of the other: {single_ids} vs {batched_ids}"
    top2 = single_logits[k].topk(2).values
    gap = float(top2[0] - top2[1])
    assert gap < NEAR_TIE, f"{label}: step {k} differs although its top-2 logit gap is {gap:.2e}"


def test_vlm_batched_generation_matches_one_by_one(vlm):
    requests = _vision_requests()
    batched_logits = vlm.first_step_logits(requests)
    single_logits = torch.cat([vlm.first_step_logits([r]) for r in requests])
    assert torch.allclose(batched_logits, single_logits, atol=1e-4, rtol=1e-4)
    assert (batched_logits[0] - batched_logits[2]).abs().max() > 1e-2  # rows are not all alike

    batched = vlm.generate_ids(requests, max_new_tokens=MAX_NEW, temperature=0.0)
    for i, request in enumerate(requests):
        single = vlm.generate_ids([request], max_new_tokens=MAX_NEW, temperature=0.0, return_logits=True)
        _assert_same_or_near_tie(single.token_ids[0], single.logits[0], batched.token_ids[i], f"request {i}")
    assert any(len(ids) > 1 for ids in batched.token_ids)
    assert len({tuple(ids) for ids in batched.token_ids}) > 1

    texts = vlm.generate(requests)
    decoded = vlm.tokenizer.batch_decode(batched.token_ids, skip_special_tokens=True)
    assert texts == [t.strip() for t in decoded]


def test_vlm_incremental_decoding_matches_a_full_forward_pass(vlm):
    """The cached generation steps keep the 3D image positions: re-reading prompt + output in one forward
    pass gives the same per-step logits."""
    request = _vision_requests()[3]
    generated = vlm.generate_ids([request], max_new_tokens=MAX_NEW, return_logits=True)
    tokens, step_logits = generated.token_ids[0], generated.logits[0]
    assert len(tokens) >= 2
    inputs = vlm.prepare([request])
    prompt_len = inputs["input_ids"].shape[1]
    extra = torch.tensor([tokens[:-1]])
    inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    text_type = torch.zeros_like(extra, dtype=torch.int32)
    inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], text_type], dim=1)
    with torch.no_grad():
        full = vlm.model(**inputs).logits[0, prompt_len - 1 :].float()
    assert torch.allclose(full, step_logits, atol=1e-4, rtol=1e-4)


def test_vlm_text_only_requests_and_sampling(vlm):
    text_only = [
        [_user("No image at all: what is ahead?")],
        [_user("A longer text-only question, about the door.")],
    ]
    greedy = vlm.generate(text_only)
    assert greedy == vlm.generate(text_only) and len(greedy) == 2
    torch.manual_seed(0)
    sampled = vlm.generate(text_only * 4, temperature=1.5, max_new_tokens=6)
    assert len(sampled) == 8 and len(set(sampled)) > 1  # sampling varies where greedy cannot
    assert vlm.generate([]) == []


def test_vlm_rejects_bad_images_and_placeholder_text(vlm):
    with pytest.raises(BackendError, match="HxWx3"):
        vlm.generate([[_user(np.zeros((32, 32), np.uint8), "grey")]])
    with pytest.raises(BackendError, match="aspect ratio|shapes"):
        vlm.generate([[_user(np.zeros((2, 600, 3), np.uint8), "a sliver")]])
    with pytest.raises(BackendError, match="image_pad"):
        vlm.generate([[_user(_image(64, 64, 1), "sneaky <|image_pad|> text")]])


def test_text_only_model_as_vlm_and_images_to_the_lm_are_refused(tiny_models_dir, lm):
    with pytest.raises(BackendError, match="text-only") as info:
        TransformersBackend(ModelConfig(model=str(tiny_models_dir / "lm")), vision=True)
    assert "qwen2" in str(info.value) and str(tiny_models_dir / "lm") in str(info.value)
    with pytest.raises(BackendError, match="text-only LM"):
        lm.generate([[_user(_image(64, 64, 1), "What is this?")]])


def test_close_releases_the_model(tiny_models_dir):
    backend = TransformersBackend(
        ModelConfig(model=str(tiny_models_dir / "lm"), max_new_tokens=2), vision=False
    )
    assert len(backend.generate([[_user("hi")]])) == 1
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.generate([[_user("hi")]])


# --- transformers: LM and LoRA ------------------------------------------------------------------


def test_lm_batched_generation_matches_one_by_one(lm):
    requests = [
        [
            ChatMessage.text("system", "Reason, then answer."),
            _user("Frame 0: Observe: a red chair on the left."),
        ],
        [_user("Question: which way? Options: A. left B. right")],
        [_user("short")],
    ]
    batched = lm.generate_ids(requests)
    for i, request in enumerate(requests):
        single = lm.generate_ids([request], return_logits=True)
        assert len(single.logits[0]) == len(single.token_ids[0])
        _assert_same_or_near_tie(single.token_ids[0], single.logits[0], batched.token_ids[i], f"request {i}")
    texts = lm.generate(requests)
    assert len(texts) == 3 and all(isinstance(t, str) for t in texts)


def test_lm_batches_drop_the_rows_that_ended_and_write_what_generate_writes(lm, monkeypatch):
    """A text-only batch decodes with each row leaving the batch once it has ended (backends/decoding.py):
    greedy, its completions are generate's, token for token, with rows ending at different steps."""
    from embodied_r_ros.backends import transformers_backend

    requests = [[_user("Frame 0: Observe: a red chair on the left.")], [_user("Which way? A. left B. right")],
                [_user("short")], [_user("Frame 1: a blue door far ahead, 4 m.")]]  # fmt: skip
    with monkeypatch.context() as plain:
        plain.setattr(transformers_backend, "supports", lambda config: False)
        first = lm.generate_ids(requests, max_new_tokens=12, temperature=0.0).token_ids
    places: dict[int, set[int]] = {}
    for ids in first:
        for place, token in enumerate(ids[1:8], 1):
            places.setdefault(token, set()).add(place)
    end = max(places, key=lambda t: len(places[t]))  # written by the rows at several steps: an end there
    assert len(places[end]) > 1
    monkeypatch.setattr(lm.model.generation_config, "eos_token_id", [end])
    with monkeypatch.context() as plain:
        plain.setattr(transformers_backend, "supports", lambda config: False)
        expected = lm.generate_ids(requests, max_new_tokens=12, temperature=0.0).token_ids
    calls = []
    decode = transformers_backend.decode_batch
    monkeypatch.setattr(transformers_backend, "decode_batch", lambda *a: calls.append(a) or decode(*a))
    ours = lm.generate_ids(requests, max_new_tokens=12, temperature=0.0).token_ids
    assert len(calls) == 1 and ours == expected
    assert len({len(ids) for ids in ours}) > 1 and min(map(len, ours)) < 12  # rows ended at different steps
    sampled = lm.generate_ids(requests, max_new_tokens=12, temperature=1.0).token_ids
    assert len(calls) == 2 and len(sampled) == len(requests) and all(end not in ids for ids in sampled)


def test_prompts_beyond_the_context_are_refused_before_generating(lm, vlm, monkeypatch):
    long = [[_user("Which way did I turn? " * 20)]]
    short = [[_user("short")]]
    monkeypatch.setattr(lm.model.config, "max_position_embeddings", 64)
    with pytest.raises(PromptTooLongError, match=r"exceeds the 64-token context") as caught:
        lm.generate(long, max_new_tokens=8)
    assert isinstance(caught.value, ValueError)  # the node answers success=false with the message
    assert len(lm.generate(short, max_new_tokens=8)) == 1  # what fits still runs
    monkeypatch.setattr(vlm.model.config.text_config, "max_position_embeddings", 64)
    with pytest.raises(PromptTooLongError, match="tokens \\+ 8 new tokens"):
        vlm.generate([[_user(_image(120, 160, 1), "Describe the scene. " * 10)]], max_new_tokens=8)


def _save_adapter(base_dir: Path, out: Path, *, nonzero: bool) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    if nonzero:  # a fresh LoRA has B = 0 (no effect); a trained one does not
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, param in peft_model.named_parameters():
                if "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    peft_model.save_pretrained(out)
    return out


def test_lora_adapter_changes_the_output_only_when_its_weights_do(tiny_models_dir, tmp_path, lm):
    request = [[_user("Frame 0: Observe: a tall building ahead. Which way is the river?")]]
    base = lm.first_step_logits(request)

    zero = _save_adapter(tiny_models_dir / "lm", tmp_path / "zero", nonzero=False)
    with_zero = load_backend(model_config(str(tiny_models_dir / "lm"), adapter=str(zero)), vision=False)
    assert torch.allclose(with_zero.first_step_logits(request), base, atol=1e-5)

    trained = _save_adapter(tiny_models_dir / "lm", tmp_path / "trained", nonzero=True)
    config = model_config(str(tiny_models_dir / "lm"), adapter=str(trained), max_new_tokens=MAX_NEW)
    adapted = load_backend(config, vision=False)
    assert (adapted.first_step_logits(request) - base).abs().max() > 1e-2
    assert adapted.generate_ids(request).token_ids != lm.generate_ids(request).token_ids


def test_adapter_errors_name_the_folder(tiny_models_dir, tmp_path):
    model = str(tiny_models_dir / "lm")
    with pytest.raises(ModelNotFoundError, match="adapter directory .*nowhere"):
        TransformersBackend(model_config(model, adapter=str(tmp_path / "nowhere")), vision=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BackendError, match="adapter_config.json"):
        TransformersBackend(model_config(model, adapter=str(tmp_path / "empty")), vision=False)


# --- resolving models ---------------------------------------------------------------------------


def test_missing_model_fails_at_once_with_the_fix():
    name = "no-such-owner-4d1c/made-up-model-7b"
    with pytest.raises(ModelNotFoundError) as info:
        load_backend(ModelConfig(model=name), vision=True)
    message = str(info.value)
    assert name in message and f"hf download {name}" in message and "tiny-models" in message
    assert "allow_download" in message


def test_directories_that_are_not_checkpoints(tmp_path, tiny_models_dir):
    (tmp_path / "README.md").write_text("not a model")
    with pytest.raises(BackendError, match="no config.json") as info:
        load_backend(ModelConfig(model=str(tmp_path)), vision=False)
    assert str(tmp_path) in str(info.value)

    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(tiny_models_dir / "lm" / "config.json", partial / "config.json")
    with pytest.raises(BackendError, match="no weights"):
        resolve_model_dir(str(partial))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model_dir(str(tmp_path / "missing" / "deeper" / "model"))
    with pytest.raises(ModelNotFoundError, match="no model configured"):
        resolve_model_dir("")


def _run_isolated(code: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (the hub reads its settings at import) with extra env vars."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **env_extra}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )


def test_download_failure_and_hub_cache_lookup(tmp_path, tiny_models_dir):
    cache = tmp_path / "hub"
    snapshot = cache / "models--tiny-org--tiny-lm" / "snapshots" / ("0" * 40)
    shutil.copytree(tiny_models_dir / "lm", snapshot)
    (cache / "models--tiny-org--tiny-lm" / "refs").mkdir()
    (cache / "models--tiny-org--tiny-lm" / "refs" / "main").write_text("0" * 40)
    result = _run_isolated(
        """
        from embodied_r_ros.backends import ModelNotFoundError, resolve_model_dir
        print("CACHED", resolve_model_dir("tiny-org/tiny-lm"))
        try:
            resolve_model_dir("no-such-owner-4d1c/made-up-model-7b", allow_download=True)
        except ModelNotFoundError as exc:
            print("ERROR", exc)
        """,
        {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)},
    )
    assert result.returncode == 0, result.stderr
    assert f"CACHED {snapshot}" in result.stdout
    error = result.stdout.split("ERROR", 1)[1]
    assert "made-up-model-7b" in error and "downloading it failed" in error and "HF_HUB_OFFLINE" in error
    assert "hf download" in error


# --- OpenAI-compatible HTTP backend -------------------------------------------------------------


@dataclass
class ServerScript:
    """What the test server does; handlers read it under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[dict[str, Any]] = field(default_factory=list)
    fail_status: list[int] = field(default_factory=list)  # statuses to answer, in order, before serving
    barrier: threading.Barrier | None = None  # all parties must be in flight at once
    hold: threading.Event | None = None  # block until set (for timeouts)
    echo_headers_on_error: bool = False


def _decode_data_url(url: str) -> np.ndarray:
    assert url.startswith("data:image/jpeg;base64,")
    raw = np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8)
    return cv2.cvtColor(cv2.imdecode(raw, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def _to_chat(messages: list[dict[str, Any]]) -> tuple[list[ChatMessage], list[np.ndarray]]:
    chat, images = [], []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            chat.append(ChatMessage.text(message["role"], content))
            continue
        parts: list[Any] = []
        for part in content:
            if part["type"] == "text":
                parts.append(part["text"])
            else:
                parts.append(_decode_data_url(part["image_url"]["url"]))
                images.append(parts[-1])
        chat.append(ChatMessage(message["role"], tuple(parts)))
    return chat, images


def _make_handler(script: ServerScript, backend: TransformersBackend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat, images = _to_chat(body["messages"])
            record = {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "body": body,
                "chat": chat,
                "images": images,
            }
            with script.lock:
                script.received.append(record)
                status = script.fail_status.pop(0) if script.fail_status else 200
            if status != 200:
                message = f"injected {status}"
                if script.echo_headers_on_error:
                    message += f" headers: {dict(self.headers)}"
                self._reply(status, {"error": {"message": message}})
                return
            if script.barrier is not None:
                script.barrier.wait(timeout=20)
            if script.hold is not None:
                script.hold.wait(timeout=20)
            text = backend.generate(
                [chat], max_new_tokens=body["max_tokens"], temperature=body["temperature"]
            )[0]
            record["output"] = text
            self._reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})

    return Handler


@pytest.fixture()
def server(vlm):
    script = ServerScript()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(script, vlm))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield script, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    if script.hold is not None:
        script.hold.set()
    httpd.shutdown()
    httpd.server_close()


KEY_ENV = "EMBODIED_R_TEST_API_KEY"
SECRET = "sk-test-5ecret-never-logged"


def _remote(url: str, **overrides: Any) -> OpenAIBackend:
    config = model_config(
        "tiny-vlm",
        backend="openai",
        base_url=url,
        api_key_env=KEY_ENV,
        max_new_tokens=MAX_NEW,
        **overrides,
    )
    return OpenAIBackend(config, vision=True, backoff_s=0.01)


def test_http_images_order_concurrency_and_real_generations(server, vlm, monkeypatch):
    script, url = server
    monkeypatch.setenv(KEY_ENV, SECRET)
    requests = _vision_requests()
    script.barrier = threading.Barrier(len(requests))  # times out (and fails) unless all are in flight
    results = _remote(url, max_concurrency=len(requests)).generate(requests)

    assert len(script.received) == len(requests)
    by_text = {r["chat"][-1].joined_text: r for r in script.received}
    for request, result in zip(requests, results, strict=True):
        record = by_text[request[-1].joined_text]
        assert record["path"] == "/v1/chat/completions" and record["auth"] == f"Bearer {SECRET}"
        assert record["body"]["model"] == "tiny-vlm" and record["body"]["max_tokens"] == MAX_NEW
        assert record["body"]["temperature"] == 0.0
        sent = [p for m in request for p in m.content if isinstance(p, np.ndarray)]
        assert [i.shape for i in record["images"]] == [i.shape for i in sent]
        for got, original in zip(record["images"], sent, strict=True):
            assert np.abs(got.astype(int) - original.astype(int)).mean() < 4  # JPEG-close
        # The answer is the tiny model's own generation for what the server received, in request order.
        assert result == record["output"] == vlm.generate([record["chat"]])[0]
    assert len(set(results)) > 1


def test_http_retries_server_errors_but_not_client_errors(server, monkeypatch, caplog):
    script, url = server
    monkeypatch.setenv(KEY_ENV, SECRET)
    caplog.set_level(logging.DEBUG)
    request = [[_user("What is ahead?")]]

    script.fail_status = [500, 429]
    assert len(_remote(url, retries=2).generate(request)) == 1
    assert len(script.received) == 3
    assert "HTTP 500" in caplog.text and "retry 1/2" in caplog.text

    script.received.clear()
    script.fail_status = [503, 503]
    with pytest.raises(BackendError, match="failed after 2 attempt") as info:
        _remote(url, retries=1).generate(request)
    assert url in str(info.value) and "tiny-vlm" in str(info.value)
    assert len(script.received) == 2

    script.received.clear()
    script.fail_status = [400]
    with pytest.raises(BackendError, match="HTTP 400") as info:
        _remote(url, retries=3).generate(request)
    assert "injected 400" in str(info.value) and len(script.received) == 1


def test_http_api_key_is_sent_but_never_shown(server, monkeypatch, caplog):
    script, url = server
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, SECRET)
    script.echo_headers_on_error = True  # a careless server echoing our headers back
    script.fail_status = [500, 401]
    backend = _remote(url, retries=2)
    with pytest.raises(BackendError, match="HTTP 401") as info:
        backend.generate([[_user("hello")]])
    assert script.received[0]["auth"] == f"Bearer {SECRET}"
    assert KEY_ENV in str(info.value)  # says where the key comes from ...
    for text in (str(info.value), repr(info.value), caplog.text, repr(backend), str(vars(backend))):
        assert SECRET not in text  # ... never what it is

    monkeypatch.delenv(KEY_ENV)
    script.received.clear()
    _remote(url).generate([[_user("hello")]])
    assert script.received[0]["auth"] is None


def test_http_timeout_and_unreachable_server_give_clear_errors(server, monkeypatch):
    script, url = server
    monkeypatch.delenv(KEY_ENV, raising=False)
    script.hold = threading.Event()
    with pytest.raises(BackendError, match="did not answer within timeout_s=0.5") as info:
        _remote(url, timeout_s=0.5, retries=2).generate([[_user("slow")]])
    assert "tiny-vlm" in str(info.value) and len(script.received) == 1  # no retry of a read timeout
    script.hold.set()

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    with pytest.raises(BackendError, match="failed after 2 attempt") as info:
        _remote(closed, retries=1).generate([[_user("anyone?")]])
    assert closed in str(info.value) and "running" in str(info.value)


def test_http_configuration_errors(server):
    _, url = server
    config = model_config("tiny-lm", backend="openai", base_url=url)
    with pytest.raises(BackendError, match="text-only"):
        OpenAIBackend(config, vision=False).generate([[_user(_image(64, 64, 1), "what is this?")]])
    with pytest.raises(BackendError, match="must start with http"):
        OpenAIBackend(model_config("m", backend="openai", base_url="localhost:8000/v1"), vision=True)
    with pytest.raises(BackendError, match="no model configured"):
        OpenAIBackend(model_config("", backend="openai", base_url=url), vision=True)
