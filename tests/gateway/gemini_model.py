"""A stand-in for a model that speaks Gemini's ``generateContent`` wire, for
tests only: the answer for turn k (the ``model`` turns already in the
request's contents), as JSON or, for ``streamGenerateContent?alt=sse``, as
``data:`` chunks the way the API sends them (text in pieces, the finish
reason and usage in the last chunk). It counts its calls and keeps the key
headers it got."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "gemini-real-key"


def turn_of(request: dict[str, Any]) -> int:
    contents = request.get("contents")
    given = contents if isinstance(contents, list) else []
    return sum(1 for c in given if isinstance(c, dict) and c.get("role") == "model")


def chunks_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    candidate = answer["candidates"][0]
    parts = candidate["content"]["parts"]
    pieces: list[dict[str, Any]] = []
    for part in parts:
        if "text" in part:
            half = len(part["text"]) // 2
            pieces += [{"text": part["text"][:half]}, {"text": part["text"][half:]}]
        else:
            pieces.append(part)
    chunks = [
        {
            "candidates": [
                {"content": {"role": "model", "parts": [piece]}, "index": 0}
            ],
            "modelVersion": answer["modelVersion"],
            "responseId": answer["responseId"],
        }
        for piece in pieces
    ]
    chunks[-1]["candidates"][0]["finishReason"] = candidate["finishReason"]
    chunks[-1]["usageMetadata"] = answer["usageMetadata"]
    return chunks


class GeminiModel:
    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.calls = 0
        self.keys: list[str | None] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.model = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> GeminiModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        model: GeminiModel = self.server.model  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        model.calls += 1
        model.keys.append(self.headers.get("x-goog-api-key"))
        answer = model.answers[min(turn_of(request), len(model.answers) - 1)]
        if ":streamGenerateContent" in self.path and "alt=sse" in self.path:
            body = b"".join(
                f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks_of(answer)
            )
            kind = "text/event-stream"
        else:
            body, kind = json.dumps(answer).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
