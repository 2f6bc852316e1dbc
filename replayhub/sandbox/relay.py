"""Relay TCP ports on the sandbox's loopback to unix sockets bound in from the host.

    python3 relay.py --listen PORT=SOCKET [--listen PORT=SOCKET ...] -- ARGV...

A sandbox has no network, only its own loopback. The worker serves the model
gateway and the egress proxy on unix sockets in a directory bound into the
sandbox; this script, run inside by the system ``python3``, listens on
``127.0.0.1:PORT`` for each ``--listen`` and copies every connection to and from
its SOCKET, so clients that only speak TCP (SDKs honouring a base URL, tools
honouring ``HTTPS_PROXY``) work unchanged.

It is copied into the sandbox, so it imports nothing but the standard library
(``replayhub`` is not there). The host side imports :func:`splice` from it.

Lifecycle. Every listener is bound and listening before anything else happens:
if one cannot be (port taken, bad argument), the script prints one line on
stderr and exits 125 without running ARGV, so a harness can tell the relay's
failure from the command's. Then the relay serves from a forked grandchild and
the original process ``execvp``\\s ARGV, so the command keeps the pid it was
started with, its exit status and its signals; connections made before the
grandchild accepts wait in the listen backlog. The relay exits when the command
does (see `_watch`) and never earlier: signals sent to the process group are
for the command. In the sandbox the pid namespace's teardown kills it as well.
Exit 127 (126) means ARGV was not found (not executable), as a shell would say.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import socket
import struct
import sys
import threading
import time

EXIT_RELAY = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
BACKLOG = 128
# Connections served at once (a thread each, counted against the sandbox's
# process cap); further ones wait in the listen backlog.
MAX_CONNECTIONS = 64
CHUNK = 64 * 1024
CONNECT_TIMEOUT = 10.0
THREAD_STACK = 256 * 1024
_POLL_SECONDS = 0.5


class UsageError(Exception):
    """A bad command line; the message is one line."""


def parse_args(args: list[str]) -> tuple[list[tuple[int, str]], list[str]]:
    """Split ``--listen PORT=SOCKET ... -- ARGV`` into listeners and ARGV."""
    listeners: list[tuple[int, str]] = []
    at = 0
    while at < len(args) and args[at] != "--":
        option = args[at]
        if option.startswith("--listen="):
            value = option.partition("=")[2]
            at += 1
        elif option == "--listen" and at + 1 < len(args):
            value = args[at + 1]
            at += 2
        else:
            raise UsageError(f"unexpected argument {option!r}")
        port_text, sep, path = value.partition("=")
        if not sep or not path or not port_text.isdigit():
            raise UsageError(f"--listen wants PORT=SOCKET, not {value!r}")
        port = int(port_text)
        if not 0 < port < 65536:
            raise UsageError(f"port {port} is out of range")
        if any(port == seen for seen, _ in listeners):
            raise UsageError(f"port {port} is given twice")
        listeners.append((port, path))
    argv = args[at + 1 :]
    if not listeners:
        raise UsageError("no --listen PORT=SOCKET given")
    if not argv:
        raise UsageError("no command given after --")
    return listeners, argv


def splice(
    a: socket.socket,
    b: socket.socket,
    *,
    idle_timeout: float | None = None,
    close_on_b_eof: bool = False,
    chunk: int = CHUNK,
) -> tuple[int, int]:
    """Copy bytes both ways between two connected sockets; (a->b, b->a) sent.

    Returns when both directions have ended, when either side fails, when
    nothing moved for ``idle_timeout`` seconds, or, with ``close_on_b_eof``, as
    soon as ``b`` has ended and everything it sent was delivered. An end of file
    on one side is passed on as a half-close (``shutdown(SHUT_WR)``) of the
    other, so request/response protocols that half-close keep working. At most
    one chunk per direction is held, so a slow reader slows the writer down
    instead of growing a buffer. The sockets are left open, non-blocking.
    """
    flows = [_Flow(a, b), _Flow(b, a)]
    a.setblocking(False)
    b.setblocking(False)
    with selectors.DefaultSelector() as selector:
        masks = {a: 0, b: 0}
        try:
            while not all(flow.done for flow in flows):
                if close_on_b_eof and flows[1].done:
                    break
                wanted = {a: 0, b: 0}
                for flow in flows:
                    if flow.pending:
                        wanted[flow.dst] |= selectors.EVENT_WRITE
                    elif not flow.eof:
                        wanted[flow.src] |= selectors.EVENT_READ
                for sock, mask in wanted.items():
                    if mask == masks[sock]:
                        continue
                    if not masks[sock]:
                        selector.register(sock, mask)
                    elif not mask:
                        selector.unregister(sock)
                    else:
                        selector.modify(sock, mask)
                    masks[sock] = mask
                events = selector.select(idle_timeout)
                if not events:
                    break
                for key, mask in events:
                    for flow in flows:
                        if mask & selectors.EVENT_READ and key.fileobj is flow.src:
                            flow.read(chunk)
                        if mask & selectors.EVENT_WRITE and key.fileobj is flow.dst:
                            flow.write()
        except OSError:
            pass  # a reset or a broken pipe ends the whole connection
    return flows[0].sent, flows[1].sent


class _Flow:
    """One direction of a spliced connection."""

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src = src
        self.dst = dst
        self.pending = b""
        self.eof = False
        self.sent = 0

    @property
    def done(self) -> bool:
        return self.eof and not self.pending

    def read(self, chunk: int) -> None:
        if self.pending or self.eof:
            return
        try:
            data = self.src.recv(chunk)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self.eof = True
            with contextlib.suppress(OSError):
                self.dst.shutdown(socket.SHUT_WR)
            return
        self.pending = data
        # Most writes to a healthy peer complete at once: trying now saves a
        # round through the selector for every chunk.
        self.write()

    def write(self) -> None:
        if not self.pending:
            return
        try:
            sent = self.dst.send(self.pending)
        except (BlockingIOError, InterruptedError):
            return
        self.pending = self.pending[sent:]
        self.sent += sent


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


def _relay_one(client: socket.socket, path: str, slots: threading.Semaphore) -> None:
    try:
        with client:
            # Small request/response writes must not wait for Nagle's delayed
            # acknowledgement: loopback latency stays in microseconds.
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with upstream:
                upstream.settimeout(CONNECT_TIMEOUT)
                try:
                    upstream.connect(path)
                except OSError:
                    # Nothing listens there: a reset tells the client at once.
                    client.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    return
                splice(client, upstream)
    except OSError:
        pass
    finally:
        slots.release()


def _accept_loop(
    listener: socket.socket, path: str, slots: threading.Semaphore
) -> None:
    while True:
        slots.acquire()
        try:
            client, _ = listener.accept()
        except OSError:
            slots.release()
            time.sleep(0.05)  # out of file descriptors: let connections finish
            continue
        try:
            threading.Thread(
                target=_relay_one, args=(client, path, slots), daemon=True
            ).start()
        except RuntimeError:
            # The sandbox's process cap counts threads: drop this connection
            # rather than the listener.
            client.close()
            slots.release()
            time.sleep(0.05)


def _watch(command_pid: int, pidfd: int | None) -> None:
    """Return once the command's process is gone.

    The relay is a grandchild, not a child, of the command's process: the
    command never finds an unexpected child (a program reaping every child
    until ECHILD would otherwise wait for the relay forever), and once the
    middle process exits the relay belongs to the reaper above (bwrap as the
    sandbox's pid 1, Docker's init, or the host's). That rules out polling
    getppid() and a pipe whose write end the command inherits (it would leak
    into the command and everything it starts, keeping the relay alive after
    the command). A pidfd opened on the original process before forking is
    close-on-exec, so the command never holds it, and it becomes readable
    the moment that process exits. Where pidfds are unavailable, polling
    whether the pid still lives is the fallback.
    """
    if pidfd is not None:
        select.select([pidfd], [], [])
        return
    while True:
        time.sleep(_POLL_SECONDS)
        try:
            os.kill(command_pid, 0)
            with open(f"/proc/{command_pid}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    return
        except ProcessLookupError:
            return
        except OSError:
            continue


def _serve(
    listeners: list[tuple[socket.socket, str]], command_pid: int, pidfd: int | None
) -> None:
    # The command's output is its own: the relay writes nothing to it, and
    # holding the output pipe open past the command would delay its reader.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(number, signal.SIG_IGN)
    threading.stack_size(THREAD_STACK)
    slots = threading.Semaphore(MAX_CONNECTIONS)
    for listener, path in listeners:
        threading.Thread(
            target=_accept_loop, args=(listener, path, slots), daemon=True
        ).start()
    _watch(command_pid, pidfd)


def _fail(message: str, code: int = EXIT_RELAY) -> int:
    print(f"relay: {message}", file=sys.stderr, flush=True)
    return code


def main(args: list[str]) -> int:
    try:
        wanted, argv = parse_args(args)
    except UsageError as error:
        return _fail(str(error))
    listeners = []
    for port, path in wanted:
        try:
            listeners.append((_listen(port), path))
        except OSError as error:
            return _fail(f"cannot listen on 127.0.0.1:{port}: {error.strerror}")
    command_pid = os.getpid()
    try:
        pidfd: int | None = os.pidfd_open(command_pid)
    except (AttributeError, OSError):
        pidfd = None
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        try:
            if os.fork() == 0:
                _serve(listeners, command_pid, pidfd)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)
    # The listeners and the pidfd are close-on-exec: the command holds neither.
    if pidfd is not None:
        os.close(pidfd)
    for listener, _ in listeners:
        listener.close()
    try:
        os.execvp(argv[0], argv)  # noqa: S606 - an argv list, as given
    except FileNotFoundError:
        return _fail(f"{argv[0]}: command not found", EXIT_NOT_FOUND)
    except OSError as error:
        return _fail(f"{argv[0]}: {error.strerror}", EXIT_NOT_EXECUTABLE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
