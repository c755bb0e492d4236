"""A real local HTTP server speaking the OpenAI chat API with one fixed reply, for tests of the openai
backend's callers: it counts requests and how many were in flight at once."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FixedReplyServer:
    """``with FixedReplyServer("text", delay_s=0.05) as server:`` then point a backend at ``server.url``."""

    def __init__(self, reply: str, delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s  # > 0 lets concurrent requests overlap
        self.received = 0
        self.most_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FixedReplyServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _enter_request(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.received += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)

    def _leave_request(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers["Content-Length"]))
                server._enter_request()
                time.sleep(server.delay_s)
                server._leave_request()
                message = {"role": "assistant", "content": server.reply}
                data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
