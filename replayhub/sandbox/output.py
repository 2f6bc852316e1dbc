"""Bounded capture of a sandboxed command's output: the head and a rolling tail."""

from __future__ import annotations

from collections import deque


class HeadTailBuffer:
    """Keep the first half of `limit` bytes and the last half, whatever is fed.

    Memory stays bounded by `limit` plus one chunk however much the command
    prints, so a command writing gigabytes cannot exhaust the worker.
    """

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.total = 0
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or self.tail_limit == 0:
            return
        self._tail.append(data)
        self._tail_size += len(data)
        # Drop whole chunks while the rest still covers the tail; the last
        # partial chunk is trimmed only when the text is assembled.
        while self._tail_size - len(self._tail[0]) >= self.tail_limit:
            self._tail_size -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        """Decode as UTF-8 (invalid bytes replaced), with a marker where bytes went."""
        tail = b"".join(self._tail)[-self.tail_limit :] if self.tail_limit else b""
        if not self.truncated:
            return (bytes(self._head) + tail).decode("utf-8", errors="replace")
        omitted = self.total - len(self._head) - len(tail)
        return (
            bytes(self._head).decode("utf-8", errors="replace")
            + f"\n[... {omitted} bytes of output omitted ...]\n"
            + tail.decode("utf-8", errors="replace")
        )
