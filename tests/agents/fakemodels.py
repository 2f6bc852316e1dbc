"""Scripted fake models on 127.0.0.1, one per wire, for the real agent CLIs.

A ``FakeModel`` speaks one wire: the Anthropic Messages API (``anthropic``),
the OpenAI Responses API (``responses``), OpenAI chat completions (``chat``)
or Gemini's ``generateContent`` (``gemini``, the model in the path, streamed
by ``streamGenerateContent?alt=sse``). Each test gives it the answers to play
(``script``), as the wire's non-streamed bodies; asked for a stream, it sends
the same answer as that wire's server-sent events. Which answer a request gets
is its turn: the assistant turns already in its history, counted after the
first message holding ``task_marker`` when one is given (aider puts canned
example exchanges first), so a retry or a side call never shifts the script. A
request with no tools is a side call (a title) and gets ``side_text`` when
``tools_mark_main``. Every request is kept (``requests``). With ``delay``
(seconds, 0 by default) each answer waits that long before it is sent, as a
model taking its time.

The answer builders below write ``calc.py`` the way each CLI's own edit tool
does.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC = "anthropic"
RESPONSES = "responses"
CHAT = "chat"
GEMINI = "gemini"
MODEL_PATHS = {
    ANTHROPIC: "/v1/messages",
    RESPONSES: "/v1/responses",
    CHAT: "/v1/chat/completions",
    GEMINI: "/v1beta/models/",
}
_MESSAGE_IDS = itertools.count(1)
USAGE = {"input_tokens": 10, "output_tokens": 10}


class FakeModel:
    """One wire's scripted model; a context manager serving on 127.0.0.1."""

    def __init__(self, wire: str, *, delay: float = 0.0) -> None:
        assert wire in MODEL_PATHS, wire
        self.wire = wire
        self.delay = delay
        self.answers: list[dict[str, Any]] = []
        self.task_marker = ""
        self.tools_mark_main = True
        self.side_text = "A title"
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The provider's base URL as ``provider_add`` takes it for this wire."""
        root = f"http://127.0.0.1:{self.port}"
        return root if self.wire in (ANTHROPIC, GEMINI) else root + "/v1"

    def script(
        self,
        answers: list[dict[str, Any]],
        *,
        task_marker: str = "",
        tools_mark_main: bool = True,
    ) -> None:
        with self._lock:
            self.answers = list(answers)
            self.task_marker = task_marker
            self.tools_mark_main = tools_mark_main
            self.requests = []

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The non-streamed answer to ``body``."""
        model = str(body.get("model") or "fake-model")
        if self.tools_mark_main and not body.get("tools"):
            return text_answer(self.wire, self.side_text, model)
        turn = self.turn(body)
        if turn < len(self.answers):
            return self.answers[turn]
        return text_answer(self.wire, "Done.", model)

    def turn(self, body: dict[str, Any]) -> int:
        if self.wire == RESPONSES:
            items = body.get("input")
            listed = items if isinstance(items, list) else []
            return sum(1 for item in listed if _an_assistant_item(item))
        if self.wire == GEMINI:
            contents = body.get("contents") or []
            return sum(
                1 for c in contents if isinstance(c, dict) and c.get("role") == "model"
            )
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        if self.task_marker:
            for i, message in enumerate(messages):
                if self.task_marker in _text(message.get("content")):
                    messages = messages[i + 1 :]
                    break
        return sum(1 for m in messages if m.get("role") == "assistant")


def _an_assistant_item(item: object) -> bool:
    """A Responses input item the model made: a tool call or its message."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        return True
    return kind == "message" and item.get("role") == "assistant"


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        )
    return ""


def _handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._send(200, "application/json", b'{"object": "list", "data": []}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.partition("?")[0]
            with model._lock:
                model.requests.append({"path": path, "body": body})
            if path.endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
                return
            if path.endswith(":countTokens"):
                self._send(200, "application/json", b'{"totalTokens": 10}')
                return
            wanted = MODEL_PATHS[model.wire]
            gemini = model.wire == GEMINI and path.startswith(wanted)
            if path != wanted and not gemini:
                self._send(404, "application/json", b'{"error": "not here"}')
                return
            answer = model.answer(body)
            if model.delay:
                time.sleep(model.delay)
            if body.get("stream") or path.endswith(":streamGenerateContent"):
                events = "".join(STREAMS[model.wire](answer)).encode()
                self._send(200, "text/event-stream", events)
            else:
                self._send(200, "application/json", json.dumps(answer).encode())

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


# --- the wires' answers ----------------------------------------------------


def text_answer(wire: str, text: str, model: str) -> dict[str, Any]:
    """An answer that is only text: the end of an agent's turn."""
    if wire == ANTHROPIC:
        return anthropic([{"type": "text", "text": text}], "end_turn", model)
    if wire == RESPONSES:
        return responses(
            [
                {
                    "type": "message",
                    "id": "msg_fake_text",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": text, "annotations": []}
                    ],
                }
            ],
            model,
        )
    if wire == GEMINI:
        return gemini([{"text": text}], model)
    return chat({"role": "assistant", "content": text}, "stop", model)


def gemini(parts: list[dict], model: str) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 10,
            "totalTokenCount": 20,
        },
        "modelVersion": model,
    }


def anthropic(content: list[dict], stop: str, model: str) -> dict[str, Any]:
    # An id of its own each: Claude Code takes two answers with one id for
    # one message, and asks again.
    return {
        "id": f"msg_fake_{next(_MESSAGE_IDS)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": dict(USAGE),
    }


def responses(output: list[dict], model: str) -> dict[str, Any]:
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {
            **USAGE,
            "total_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def chat(message: dict, finish: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def tool_call(name: str, arguments: dict) -> dict[str, Any]:
    """A chat completions tool call."""
    return {
        "id": f"call_fake_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def claude_code_writes(path: str, content: str, model: str) -> list[dict]:
    """Claude Code's ``Write`` tool, then the end of its turn."""
    write = {
        "type": "tool_use",
        "id": "toolu_fake_1",
        "name": "Write",
        "input": {"file_path": path, "content": content},
    }
    return [
        anthropic([write], "tool_use", model),
        text_answer(ANTHROPIC, f"Wrote {path}.", model),
    ]


def codex_writes(path: str, content: str, model: str) -> list[dict]:
    """Codex's freeform ``apply_patch`` adding the file, then a message."""
    added = "".join(f"+{line}\n" for line in content.splitlines())
    patch = f"*** Begin Patch\n*** Add File: {path}\n{added}*** End Patch\n"
    call = {
        "type": "custom_tool_call",
        "id": "ctc_fake_1",
        "call_id": "call_fake_1",
        "status": "completed",
        "name": "apply_patch",
        "input": patch,
    }
    return [responses([call], model), text_answer(RESPONSES, f"Wrote {path}.", model)]


def aider_writes(path: str, content: str, model: str) -> list[dict]:
    """Aider's whole-file format: the name on its own line, then the file."""
    text = f"{path}\n```\n{content}```\n"
    return [chat({"role": "assistant", "content": text}, "stop", model)]


def mini_swe_agent_writes(path: str, content: str, model: str) -> list[dict]:
    """mini-swe-agent's ``bash`` tool writing the file, then its submit."""
    command = f"cat > {path} <<'EOF'\n{content}EOF"
    write = tool_call("bash", {"command": command})
    submit = tool_call(
        "bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
    )
    return [
        chat(
            {"role": "assistant", "content": "", "tool_calls": [write]},
            "tool_calls",
            model,
        ),
        chat(
            {"role": "assistant", "content": "", "tool_calls": [submit]},
            "tool_calls",
            model,
        ),
    ]


def gemini_cli_writes(path: str, content: str, model: str) -> list[dict]:
    """Gemini CLI's ``write_file`` tool (the call's id given, as a model
    does), then the end of its turn."""
    call = {
        "functionCall": {
            "id": "call_fake_1",
            "name": "write_file",
            "args": {"file_path": path, "content": content},
        }
    }
    return [gemini([call], model), text_answer(GEMINI, f"Wrote {path}.", model)]


def opencode_writes(path: str, content: str, model: str) -> list[dict]:
    """OpenCode's ``write`` tool, then the end of its turn."""
    write = tool_call("write", {"filePath": path, "content": content})
    return [
        chat(
            {"role": "assistant", "content": None, "tool_calls": [write]},
            "tool_calls",
            model,
        ),
        chat({"role": "assistant", "content": f"Wrote {path}."}, "stop", model),
    ]


# --- the wires' streams ----------------------------------------------------


def _event(name: str | None, data: dict[str, Any]) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def anthropic_stream(answer: dict[str, Any]) -> Iterator[str]:
    start = {**answer, "content": [], "stop_reason": None}
    start["usage"] = {
        "input_tokens": answer["usage"]["input_tokens"],
        "output_tokens": 1,
    }
    yield _event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(answer["content"]):
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block["input"]),
            }
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        yield _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
        yield _event(
            "content_block_stop", {"type": "content_block_stop", "index": index}
        )
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": answer["usage"]["output_tokens"]},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})


def responses_stream(answer: dict[str, Any]) -> Iterator[str]:
    sequence = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal sequence
        sequence += 1
        return _event(kind, {"type": kind, "sequence_number": sequence - 1, **fields})

    running = {**answer, "status": "in_progress", "output": []}
    yield event("response.created", response=running)
    yield event("response.in_progress", response=running)
    for index, item in enumerate(answer["output"]):
        yield event("response.output_item.added", output_index=index, item=item)
        where = {"item_id": item.get("id"), "output_index": index}
        if item["type"] == "message":
            for part_index, part in enumerate(item["content"]):
                at = {**where, "content_index": part_index}
                yield event(
                    "response.content_part.added",
                    **at,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
                yield event("response.output_text.delta", **at, delta=part["text"])
                yield event("response.output_text.done", **at, text=part["text"])
                yield event("response.content_part.done", **at, part=part)
        elif item["type"] == "custom_tool_call":
            yield event(
                "response.custom_tool_call_input.delta", **where, delta=item["input"]
            )
            yield event(
                "response.custom_tool_call_input.done", **where, input=item["input"]
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=answer)


def chat_stream(answer: dict[str, Any]) -> Iterator[str]:
    choice = answer["choices"][0]
    message = choice["message"]
    head = {k: answer[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        data = {
            **head,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return _event(None, {**data, **more})

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        yield chunk({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, choice["finish_reason"], usage=answer["usage"])
    yield "data: [DONE]\n\n"


def gemini_stream(answer: dict[str, Any]) -> Iterator[str]:
    """The whole answer as one ``data:`` event, as Gemini's API may send it."""
    yield f"data: {json.dumps(answer)}\r\n\r\n"


STREAMS = {
    ANTHROPIC: anthropic_stream,
    RESPONSES: responses_stream,
    CHAT: chat_stream,
    GEMINI: gemini_stream,
}


# --- a read of the checkout before the write -------------------------------
# The first answer has the agent show a file through its shell tool, so its
# next request carries the file's text (a base that changed it asks another
# thing). Aider has no such tool: its repository map carries the base.


def claude_code_reads(path: str, model: str) -> list[dict]:
    """Its ``Read`` tool (rather than ``Bash``, which first asks a small model
    whether the command is safe: a side call no script answers)."""
    read = {
        "type": "tool_use",
        "id": "toolu_fake_0",
        "name": "Read",
        "input": {"file_path": path},
    }
    return [anthropic([read], "tool_use", model)]


def codex_reads(path: str, model: str) -> list[dict]:
    call = {
        "type": "function_call",
        "id": "fc_fake_0",
        "call_id": "call_fake_0",
        "status": "completed",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": f"cat {path}"}),
    }
    return [responses([call], model)]


def mini_swe_agent_reads(path: str, model: str) -> list[dict]:
    read = tool_call("bash", {"command": f"cat {path}"})
    message = {"role": "assistant", "content": "", "tool_calls": [read]}
    return [chat(message, "tool_calls", model)]


def aider_reads(path: str, model: str) -> list[dict]:
    return []


def gemini_cli_reads(path: str, model: str) -> list[dict]:
    read = {
        "functionCall": {
            "id": "call_fake_0",
            "name": "read_file",
            "args": {"file_path": path},
        }
    }
    return [gemini([read], model)]
