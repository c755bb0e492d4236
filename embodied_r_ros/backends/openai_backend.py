"""Generation through an OpenAI-compatible HTTP server (vLLM, SGLang, Ollama, llama.cpp server).

Standard library only. Each request is one POST to ``{base_url}/chat/completions``; a batch is sent with up
to ``max_concurrency`` requests in flight and the answers come back in request order. Images travel
inline as base64 JPEG data URLs. Connection errors, HTTP 429 and 5xx are retried with exponential backoff;
other 4xx errors and read timeouts are not (a timed-out generation may still be running on the server).
The API key is read from the environment variable named by ``config.openai.api_key_env`` for each request
and is never stored on the object, logged, or put in an exception message.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from ..config import ModelConfig
from ..frames import FrameError, validate_image
from .base import BackendError, ChatRequest

logger = logging.getLogger(__name__)

JPEG_QUALITY = 90
_MAX_BACKOFF_S = 30.0
_HINTS = {
    400: "the server rejected the request: check that the model accepts images (a vision model) and that "
    "max_tokens fits its context",
    401: "check the API key in the environment variable {key_env}",
    403: "check the API key in the environment variable {key_env} and its permissions",
    404: "check base_url (usually ending in /v1) and that the server serves model {model!r} "
    "(GET {base_url}/models lists them)",
    413: "the request is too large: send fewer or smaller images",
    422: "the server could not parse the request: check that it is OpenAI-compatible",
}


def encode_image(image: np.ndarray, quality: int = JPEG_QUALITY) -> str:
    """An HxWx3 uint8 RGB image as a ``data:image/jpeg;base64,...`` URL."""
    import cv2

    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, buffer = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise BackendError(f"JPEG encoding failed for an image of shape {image.shape}")
    return "data:image/jpeg;base64," + base64.b64encode(buffer.tobytes()).decode("ascii")


def to_openai_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """Chat messages in the OpenAI format: plain strings for text-only turns, part lists with images."""
    messages: list[dict[str, Any]] = []
    for message in request:
        if not message.images:
            messages.append({"role": message.role, "content": message.joined_text})
            continue
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, str):
                parts.append({"type": "text", "text": part})
            else:
                try:
                    validate_image(part)
                except FrameError as exc:
                    raise BackendError(str(exc)) from exc
                parts.append({"type": "image_url", "image_url": {"url": encode_image(part)}})
        messages.append({"role": message.role, "content": parts})
    return messages


class _Retryable(Exception):
    """An attempt failed in a way worth retrying; ``message`` says how, ``delay_s`` overrides the backoff."""

    def __init__(self, message: str, delay_s: float | None = None) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class OpenAIBackend:
    """A :class:`~embodied_r_ros.backends.base.GenerationBackend` talking to an OpenAI-compatible server.

    ``vision`` says whether images may be sent (the served model must accept them). ``backoff_s`` is the
    first retry delay, doubled on each further retry.
    """

    def __init__(self, config: ModelConfig, *, vision: bool, backoff_s: float = 0.5) -> None:
        if not config.model:
            raise BackendError("openai backend: no model configured; set model to the name the server serves")
        if not config.openai.base_url.startswith(("http://", "https://")):
            raise BackendError(
                f"openai backend: base_url {config.openai.base_url!r} must start with http:// or https:// "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        self.config = config
        self.supports_images = vision
        self.url = config.openai.base_url.rstrip("/") + "/chat/completions"
        self.backoff_s = backoff_s

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.config.model!r}, url={self.url!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.config.openai.api_key_env, "") if self.config.openai.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _scrub(self, text: str) -> str:
        """Remove the API key from text that came from elsewhere (a server may echo request headers)."""
        key = os.environ.get(self.config.openai.api_key_env, "") if self.config.openai.api_key_env else ""
        return text.replace(key, "***") if key else text

    def _where(self) -> str:
        return f"{self.url} (model {self.config.model!r})"

    def _payload(self, request: ChatRequest, max_new_tokens: int, temperature: float) -> bytes:
        if not self.supports_images and any(m.images for m in request):
            raise BackendError(
                f"model {self.config.model!r} at {self.url} is used as a text-only LM but was given images; "
                "images go to the VLM backend (vision=True)"
            )
        body = {
            "model": self.config.model,
            "messages": to_openai_messages(request),
            "max_tokens": max_new_tokens,
            "temperature": temperature,
        }
        return json.dumps(body).encode("utf-8")

    def _attempt(self, data: bytes) -> str:
        """One POST; returns the completion text, raises :class:`_Retryable` or :class:`BackendError`."""
        http_request = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(http_request, timeout=self.config.openai.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = self._scrub(_error_detail(exc))
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code}: {detail}", _retry_after(exc)) from None
            hint = _HINTS.get(exc.code, "check the request and the server log").format(
                key_env=self.config.openai.api_key_env,
                model=self.config.model,
                base_url=self.config.openai.base_url,
            )
            raise BackendError(f"{self._where()} answered HTTP {exc.code}: {detail}; {hint}") from None
        except TimeoutError as exc:
            raise BackendError(
                f"{self._where()} did not answer within timeout_s={self.config.openai.timeout_s:g} s; raise "
                "timeout_s, lower max_new_tokens, or check that the server is not overloaded"
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise BackendError(
                    f"{self._where()}: connecting timed out after {self.config.openai.timeout_s:g} s; check "
                    "base_url and the network"
                ) from exc
            raise _Retryable(f"cannot connect: {exc.reason}") from None
        except (OSError, http.client.HTTPException) as exc:  # reset, refused or cut off mid-request
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
        return self._completion_text(raw)

    def _completion_text(self, raw: bytes) -> str:
        try:
            answer = json.loads(raw)
            content = answer["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            snippet = self._scrub(raw[:200].decode("utf-8", "replace"))
            raise BackendError(
                f"{self._where()} sent an answer that is not an OpenAI chat completion ({snippet!r}); check "
                "that base_url points at an OpenAI-compatible /v1 endpoint"
            ) from exc
        return content or ""

    def _one(self, request: ChatRequest, max_new_tokens: int, temperature: float) -> str:
        data = self._payload(request, max_new_tokens, temperature)
        attempts = self.config.openai.retries + 1
        for attempt in range(attempts):
            try:
                return self._attempt(data)
            except _Retryable as exc:
                if attempt + 1 == attempts:
                    raise BackendError(
                        f"{self._where()} failed after {attempts} attempt(s): {exc}; check that the server "
                        "(vLLM, SGLang, Ollama, llama.cpp) is running and reachable at base_url"
                    ) from None
                delay = exc.delay_s if exc.delay_s is not None else self.backoff_s * 2**attempt
                delay = min(delay, _MAX_BACKOFF_S)
                logger.warning(
                    "%s: %s; retry %d/%d in %.2f s", self._where(), exc, attempt + 1, attempts - 1, delay
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        """One completion per request, in order; up to ``max_concurrency`` requests in flight."""
        if not requests:
            return []
        tokens = max_new_tokens or self.config.max_new_tokens
        temp = self.config.temperature if temperature is None else temperature
        workers = min(self.config.openai.max_concurrency, len(requests))
        if workers == 1:
            return [self._one(request, tokens, temp) for request in requests]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-backend") as pool:
            return list(pool.map(lambda request: self._one(request, tokens, temp), requests))

    def close(self) -> None:
        """Nothing to release: each request opens and closes its own connection."""


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The server's error message from an HTTP error body (OpenAI format or plain text), shortened."""
    try:
        body = exc.read()[:2000].decode("utf-8", "replace")
    except OSError:
        return exc.reason or ""
    try:
        parsed = json.loads(body)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        message = error.get("message", body) if isinstance(error, dict) else str(error)
    except ValueError:
        message = body
    return str(message).strip()[:300] or str(exc.reason)


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
