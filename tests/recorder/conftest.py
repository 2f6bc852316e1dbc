"""The recorder's world: a bare repository acting as ``origin``, a developer's
clone of it, the fake model provider, an agent on the official SDKs, and the
recorder run as a user runs it: the one file the server serves for download,
a subprocess, in the clone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from replayhub.demo.model_api import REAL_KEY, StandInProvider
from replayhub.ingest.tokens import token_issue
from replayhub.models import Project, Run
from replayhub.recorder import bundle
from tests.factories import make_git_project
from tests.gitrepos import Repo, make_repo

# The agent: the official SDKs, pointed by the recorder's variables at its
# endpoint, a call each way (plain and streamed), then an edit of app.py and,
# when asked, a commit and then one more file. It prints what it heard, and
# exits as asked. Modes "edit" and "noop" make no call (importing an SDK takes
# seconds, and most tests are about the repository); "noop" changes nothing.
AGENT = """
import os, subprocess, sys

mode = sys.argv[1]
prompt = open(os.environ["REPLAYHUB_PROMPT_FILE"]).read()
model = os.environ["REPLAYHUB_MODEL"]
messages = [{"role": "user", "content": prompt}]
again = [{"role": "user", "content": "once more: " + prompt}]
said = streamed = prompt
if mode.startswith("anthropic"):
    import anthropic

    client = anthropic.Anthropic(max_retries=0)
    reply = client.messages.create(model=model, max_tokens=64, messages=messages)
    said = reply.content[0].text
    with client.messages.stream(model=model, max_tokens=64, messages=again) as s:
        streamed = "".join(s.text_stream)
elif mode.startswith("openai"):
    import openai

    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=model, messages=messages)
    said = reply.choices[0].message.content
    chunks = client.chat.completions.create(model=model, messages=again, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
print("agent heard:", said, "/", streamed.strip())
if mode != "noop":
    with open("app.py", "a") as out:
        out.write("# " + said + "\\n")
if "+commit" in mode:
    subprocess.run(["git", "commit", "-q", "-am", "agent: note the task"], check=True)
if mode.endswith("+more"):
    open("more.py", "w").write("MORE = 1\\n")
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""


def sh(cwd: Path, *args: str, check: bool = True) -> str:
    """git as the developer runs it in their clone."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=check
    )
    return done.stdout.strip()


@dataclass
class Recorded:
    returncode: int
    stdout: str
    stderr: str

    @property
    def run_id(self) -> str:
        """The run id the recorder names in its last lines."""
        for word in self.stderr.replace("/", " ").replace(".json", " ").split():
            if word[:8].isdigit() and "T" in word and "-" in word:
                return word.rstrip(".")
        raise AssertionError(f"no run id in {self.stderr!r}")


@dataclass
class World:
    recorder: Path
    home: Path
    origin: Path
    checkout: Path
    agent: Path
    fake: StandInProvider
    server: str
    token: str
    project: Project | None

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ANTHROPIC_", "OPENAI_", "GIT_", "REPLAYHUB_"))
        }
        env.update(
            HOME=str(self.home),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_AUTHOR_NAME="Dev",
            GIT_AUTHOR_EMAIL="dev@example.com",
            GIT_COMMITTER_NAME="Dev",
            GIT_COMMITTER_EMAIL="dev@example.com",
            ANTHROPIC_API_KEY=REAL_KEY,
            OPENAI_API_KEY=REAL_KEY,
            REPLAYHUB_TOKEN=self.token,
        )
        env.update(extra)
        return env

    def record(
        self,
        mode: str = "edit",
        *flags: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        model: str = "claude-test",
        prompt: str = "Add a note to app.py",
        server: str | None = None,
    ) -> Recorded:
        argv = [sys.executable, str(self.recorder)]
        argv += ["--server", server or self.server, "--project", "shop"]
        argv += ["--prompt", prompt, "--model", model]
        argv += ["--anthropic-upstream", self.fake.base_url]
        argv += ["--openai-upstream", self.fake.base_url + "/v1", *flags]
        argv += ["--", sys.executable, str(self.agent), mode]
        return self.call(argv, cwd=cwd, env=env)

    def call(
        self,
        argv: list[str],
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Recorded:
        done = subprocess.run(
            argv,
            cwd=cwd or self.checkout,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return Recorded(done.returncode, done.stdout, done.stderr)

    def send(self, *flags: str) -> Recorded:
        return self.call([sys.executable, str(self.recorder), *flags])

    def state(self) -> dict[str, str]:
        """What the developer sees of their clone: HEAD, branch, index, status."""
        return {
            "head": sh(self.checkout, "rev-parse", "HEAD"),
            "branch": sh(self.checkout, "symbolic-ref", "--short", "HEAD"),
            "staged": sh(self.checkout, "diff", "--cached", "--name-only"),
            "status": sh(self.checkout, "status", "--porcelain", "-uall"),
        }

    def origin_ref(self, ref: str) -> str:
        """The commit ``ref`` names in origin, or "" when it has no such ref."""
        return sh(self.origin, "rev-parse", "--verify", "--quiet", ref, check=False)

    def stored(self, run_id: str) -> Run:
        return Run.objects.get(external_id=run_id)


def spooled(world: World) -> list[Path]:
    return sorted((world.checkout / ".git" / "replayhub" / "spool").glob("*.json"))


def read_spool(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def make_world(
    tmp_path: Path, fake: StandInProvider, server: str, recorder: Path
) -> World:
    seed = make_repo(tmp_path, {"app.py": "VALUE = 1\n"}, name="seed")
    origin = tmp_path / "origin.git"
    sh(tmp_path, "clone", "--quiet", "--bare", str(seed.path), str(origin))
    checkout = tmp_path / "checkout"
    sh(tmp_path, "clone", "--quiet", str(origin), str(checkout))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    home = tmp_path / "home"
    home.mkdir()
    return World(recorder, home, origin, checkout, agent, fake, server, "", None)


@pytest.fixture(scope="session")
def recorder(tmp_path_factory) -> Path:
    """The recorder as a user downloads it: one file, run by its path (so that
    no module of this package is what runs)."""
    path = tmp_path_factory.mktemp("download") / "replayhub-record.py"
    path.write_text(bundle.source(), encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def fake() -> Iterator[StandInProvider]:
    with StandInProvider(key=REAL_KEY) as provider:
        yield provider


@pytest.fixture
def world(tmp_path, fake, live_server, recorder) -> World:
    """A developer's clone, and ReplayHub serving the project on its origin (a
    local path: the project repository is the bare repository itself)."""
    made = make_world(tmp_path, fake, live_server.url, recorder)
    made.project = make_git_project(Repo(made.origin))
    made.token = token_issue(project=made.project)[1]
    return made


class LocalHost:
    """A web server on 127.0.0.1, in a thread, that answers every request with
    ``status`` (and ``location``, for a redirect) and ``reply``'s body for the
    request's headers, and keeps what it got."""

    def __init__(
        self,
        status: int = 200,
        location: str | None = None,
        reply: Callable[[dict[str, str]], Any] | None = None,
    ) -> None:
        self.status = status
        self.location = location
        self.reply = reply or (lambda headers: {"imported": 1, "stolen": True})
        self.received: list[tuple[str, str, dict[str, str]]] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                host.received.append((self.command, self.path, headers))
                body = json.dumps(host.reply(headers)).encode()
                self.send_response(host.status)
                if host.location:
                    self.send_header("Location", host.location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LocalHost:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[LocalHost]:
    """Another host, which no credential may reach: it answers 200 to all."""
    with LocalHost() as host:
        yield host
