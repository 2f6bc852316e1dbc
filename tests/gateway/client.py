"""The agent's side: HTTP over the gateway's unix socket, the requests an SDK
of each API would send, and calls to the ``claude`` and ``gpt`` providers of
the tests' gateways."""

from __future__ import annotations

import http.client
import json
import secrets
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replayhub.gateway import ModelGateway

# Random per run, so finding it upstream proves a leak, not a coincidence.
PLACEHOLDER = "replayhub-placeholder-" + secrets.token_hex(8)
MESSAGES = "/claude/v1/messages"
CHAT = "/gpt/v1/chat/completions"


class UnixHTTPConnection(http.client.HTTPConnection):
    """An ``http.client`` connection to a unix socket; the Host header says
    127.0.0.1, as the sandbox relay's clients would."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        super().__init__("127.0.0.1", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


def anthropic_headers(key: str) -> dict[str, str]:
    return {
        "x-api-key": key,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }


def openai_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def messages_body(text: str, *, model: str = "claude-test", stream: bool = False):
    return json.dumps(
        {
            "model": model,
            "max_tokens": 100,
            "system": "be brief",
            "messages": [{"role": "user", "content": text}],
            "stream": stream,
        }
    ).encode()


def chat_body(text: str, *, model: str = "gpt-test", stream: bool = False):
    return json.dumps(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": text},
            ],
            "stream": stream,
        }
    ).encode()


def call(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One whole request and response: status, headers (lower-case), body."""
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    return (
        response.status,
        {k.lower(): v for k, v in response.getheaders()},
        data,
    )


def events(body: bytes) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event in ``body``."""
    found = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            found.append(json.loads(line[6:]))
    return found


def agent(gateway: ModelGateway) -> UnixHTTPConnection:
    return UnixHTTPConnection(gateway.socket_path)


def ask_claude(gateway, text="hello there world", *, stream=False, key=PLACEHOLDER):
    return call(
        agent(gateway),
        "POST",
        MESSAGES,
        messages_body(text, stream=stream),
        anthropic_headers(key),
    )


def ask_gpt(gateway, text="hello there world", *, stream=False, key=PLACEHOLDER):
    return call(
        agent(gateway),
        "POST",
        CHAT,
        chat_body(text, stream=stream),
        openai_headers(key),
    )


def error_message(kind: str, body: bytes) -> str:
    data = json.loads(body)
    if kind == "anthropic":
        assert data["type"] == "error"
    return data["error"]["message"]
