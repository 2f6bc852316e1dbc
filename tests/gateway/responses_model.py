"""A stand-in for a model that speaks the OpenAI Responses API, for tests
only: it answers ``POST /v1/responses`` from a script (the answer for turn k,
k being the assistant turns already in the request's input, as Codex's real
conversation counts them), as JSON or as the API's server-sent events, and
counts the calls it got. Its events are written here, independently of the
gateway's own ``responses.events``, the way the API sends them: text and
arguments in several deltas."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-responses-real-key"


def turn_of(request: dict[str, Any]) -> int:
    items = request.get("input")
    turns = 0
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type"), item.get("role")
        if kind in ("function_call", "custom_tool_call") or (
            kind == "message" and role == "assistant"
        ):
            turns += 1
    return turns


def _pieces(text: str) -> list[str]:
    size = max(len(text) // 3, 1)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_of(answer: dict[str, Any]) -> bytes:
    out: list[bytes] = []

    def send(kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(out), **fields}
        out.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

    shell = {**answer, "status": "in_progress", "output": []}
    send("response.created", response=shell)
    send("response.in_progress", response=shell)
    for index, item in enumerate(answer["output"]):
        where = {"item_id": item.get("id", ""), "output_index": index}
        send("response.output_item.added", output_index=index, item=item)
        if item["type"] == "message":
            for number, part in enumerate(item["content"]):
                at = {**where, "content_index": number}
                send("response.content_part.added", **at, part={**part, "text": ""})
                for piece in _pieces(part["text"]):
                    send("response.output_text.delta", **at, delta=piece)
                send("response.output_text.done", **at, text=part["text"])
                send("response.content_part.done", **at, part=part)
        elif item["type"] == "custom_tool_call":
            for piece in _pieces(item["input"]):
                send("response.custom_tool_call_input.delta", **where, delta=piece)
            send("response.custom_tool_call_input.done", **where, input=item["input"])
        elif item["type"] == "function_call":
            for piece in _pieces(item["arguments"]):
                send("response.function_call_arguments.delta", **where, delta=piece)
            send(
                "response.function_call_arguments.done",
                **where,
                arguments=item["arguments"],
            )
        send("response.output_item.done", output_index=index, item=item)
    send("response.completed", response=answer)
    return b"".join(out)


class ResponsesModel:
    """Serves ``answers`` on 127.0.0.1 while open; ``calls`` counts requests."""

    def __init__(self, answers: list[dict[str, Any]], *, cut: bool = False) -> None:
        self.answers = answers
        self.calls = 0
        # ``cut``: the stream stops before response.completed.
        self.cut = cut
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.model = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ResponsesModel:
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
        model: ResponsesModel = self.server.model  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        model.calls += 1
        answer = model.answers[min(turn_of(request), len(model.answers) - 1)]
        if request.get("stream"):
            body = stream_of(answer)
            if model.cut:
                body = body[: body.rindex(b"event: response.completed")]
            kind = "text/event-stream"
        else:
            body, kind = json.dumps(answer).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
