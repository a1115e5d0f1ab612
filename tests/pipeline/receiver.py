"""A webhook receiver for the tests: an ``http.server`` in a thread that records every POST
and answers as it is told (the webhook tests of the API, the core and the real worker)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Receiver", "Answer"]

#: (path, headers, tries of this event at this path so far, this one included) ->
#: (status, extra headers)
Answer = Callable[[str, dict[str, str], int], tuple[int, dict[str, str]]]


class Receiver:
    """Records each POST as (path, headers, body) in ``got``, in arrival order, and answers
    ``answer``'s status and headers (200 by default). A context manager (shut down on
    exit); ``url`` is its base address on loopback."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.got: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.answer: Answer = answer or (lambda path, headers, tries: (200, {}))
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = dict(self.headers)
                with receiver.lock:
                    receiver.got.append((self.path, headers, body))
                    tries = sum(1 for p, h, _ in receiver.got if p == self.path and
                                h.get("X-Labelq-Delivery") == headers.get("X-Labelq-Delivery"))
                    status, extra = receiver.answer(self.path, headers, tries)
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @classmethod
    def answering(cls, statuses: list[int], redirect_to: str | None = None) -> Receiver:
        """One that answers ``statuses`` in turn (200 once they run out); on the path
        ``/redirect`` with a ``Location: redirect_to``."""
        left = list(statuses)

        def answer(path: str, headers: dict[str, str], tries: int) -> tuple[int,
                                                                            dict[str, str]]:
            extra = {"Location": redirect_to} if path == "/redirect" and redirect_to else {}
            return (left.pop(0) if left else 200), extra

        return cls(answer)

    def posts(self) -> list[tuple[dict[str, str], bytes]]:
        """Every POST so far: (headers, body), in arrival order."""
        with self.lock:
            return [(h, b) for _, h, b in self.got]

    def requests(self, path: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
        """The POSTs to ``path`` so far: (headers, the JSON body)."""
        with self.lock:
            return [(h, json.loads(b)) for p, h, b in self.got if p == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
