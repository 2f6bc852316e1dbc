"""A sandboxed phase's only way out: the model gateway and the egress proxy.

For one phase of one replay (the agent, or the test runs), this starts what the
project allows — the model gateway for its providers (agent phase only), the
egress proxy for its allowlisted hosts — on unix sockets in a ReplayHub-owned
directory, and says what the sandbox gets: a read-only bind of that directory,
the environment that points clients at it, and the argv wrapped in the relay
that listens on 127.0.0.1 inside. Keys are read from the worker's environment
here and handed to the gateway only; the sandbox sees a per-replay placeholder.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from types import TracebackType

from django.conf import settings

from replayhub.gateway.egress import AttemptCounts, ConnectAttempt, EgressProxy
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from replayhub.gateway.server import Caps, MeteredCall, ModelGateway, Upstream
from replayhub.models import Project, Provider
from replayhub.sandbox import Bind, Runner, SandboxOutcome, SandboxSpec
from replayhub.sandbox.network import MAX_SOCKET_PATH, proxy_env, relay_mount

MODEL_PORT = 8790
EGRESS_PORT = 8791
MODEL_SOCKET = "model.sock"
EGRESS_SOCKET = "egress.sock"


class MissingKey(Exception):
    """A provider's key variable is not set on this worker."""


@dataclass(frozen=True)
class Needs:
    """What a phase is allowed to reach, read from the project once.

    ``proxy``: run the egress proxy even with an empty allowlist, so that every
    attempt is refused *and recorded*.
    """

    providers: tuple[Provider, ...] = ()
    egress: tuple[str, ...] = ()
    recorded_provider: str = ""
    proxy: bool = False

    def __bool__(self) -> bool:
        return bool(self.providers or self.egress or self.proxy)


def agent_needs(project: Project, recorded_provider: str = "") -> Needs:
    providers = tuple(project.providers.all())
    return Needs(
        providers=providers,
        egress=tuple(project.egress_agent),
        recorded_provider=recorded_provider,
        # An agent with model access is a networked program: whatever else it
        # tries to reach is worth knowing.
        proxy=bool(providers or project.egress_agent),
    )


def test_needs(project: Project) -> Needs:
    egress = tuple(project.egress_tests)
    return Needs(egress=egress, proxy=bool(egress))


def fits_sockets(directory: Path) -> bool:
    """Whether every socket of a phase fits a unix socket path in ``directory``."""
    longest = max(len(MODEL_SOCKET), len(EGRESS_SOCKET))
    return len(os.fsencode(directory)) + 1 + longest <= MAX_SOCKET_PATH


@dataclass
class PhaseNetwork:
    """The running gateway and proxy of one phase; a context manager."""

    directory: Path
    needs: Needs
    phase: str
    caps: Caps = field(default_factory=lambda: Caps(None, None, None))
    placeholder: str = field(default_factory=lambda: f"rh-{secrets.token_urlsafe(24)}")
    # A tape replay's player; every phase with a gateway records its tape.
    player: TapePlayer | None = None
    recorder: TapeRecorder | None = None
    gateway: ModelGateway | None = None
    proxy: EgressProxy | None = None
    bind: Bind | None = None
    env: dict[str, str] = field(default_factory=dict)
    _ports: dict[int, str] = field(default_factory=dict)
    _stack: ExitStack = field(default_factory=ExitStack)

    def __enter__(self) -> PhaseNetwork:
        if not fits_sockets(self.directory):
            # A deep work directory would make the sockets' paths longer than
            # a unix socket path may be: they go in a short private directory
            # instead, removed when the phase ends.
            self.directory = Path(tempfile.mkdtemp(prefix="replayhub-net-"))
            self._stack.callback(shutil.rmtree, self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            if self.needs.providers:
                self._start_gateway()
            if self.needs.proxy:
                self._start_proxy()
            mount = relay_mount(self.directory, self._ports)
        except BaseException:
            self._stack.close()
            raise
        self.bind = mount.bind
        self._mount = mount
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stack.close()

    def wrap(self, argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        return self._mount.wrap(argv)

    @property
    def calls(self) -> list[MeteredCall]:
        return list(self.gateway.calls) if self.gateway else []

    @property
    def attempts(self) -> list[ConnectAttempt]:
        return list(self.proxy.attempts) if self.proxy else []

    @property
    def attempt_counts(self) -> AttemptCounts:
        return self.proxy.counts if self.proxy else AttemptCounts()

    @property
    def refused_counts(self) -> dict[str, int]:
        return dict(self.gateway.refused_counts) if self.gateway else {}

    @property
    def cap_fired(self) -> str:
        """The cap that refused a call ("" when none did)."""
        return (self.gateway.cap_fired or "") if self.gateway else ""

    @property
    def cap_passed(self) -> str:
        """A cap the calls' measured totals went past ("" when none did): an
        answer longer than its reservation, a usage no reservation foresaw."""
        return self.gateway.totals.passed(self.caps) if self.gateway else ""

    def spent(self) -> str:
        """What the calls added up to, against the caps, as words."""
        if self.gateway is None:
            return ""
        totals, caps = self.gateway.totals, self.caps
        parts = [f"{totals.requests} calls", f"{totals.tokens:,} tokens"]
        if totals.cost_usd:
            parts.append(f"${totals.cost_usd:.6f}")
        limits = []
        if caps.max_tokens is not None:
            limits.append(f"{caps.max_tokens:,} tokens")
        if caps.max_cost_usd is not None:
            limits.append(f"${caps.max_cost_usd}")
        if caps.max_requests is not None:
            limits.append(f"{caps.max_requests} calls")
        against = f" against caps of {', '.join(limits)}" if limits else ""
        return f"{', '.join(parts)}{against}"

    def stop_after_cap(self, stop: threading.Event, grace: float) -> threading.Event:
        """Sets ``stop`` ``grace`` seconds after a cap first refused a call, or
        a tape replay first refused one its tape could not answer; the event
        returned ends the watch."""
        done = threading.Event()
        gateway = self.gateway

        def watch() -> None:
            while not done.wait(0.2):
                fired_at = (
                    (gateway.cap_fired_at or gateway.tape_left_at) if gateway else None
                )
                if fired_at is not None and time.monotonic() - fired_at >= grace:
                    stop.set()
                    return

        if gateway is not None:
            threading.Thread(target=watch, name="cap grace", daemon=True).start()
        return done

    def _start_gateway(self) -> None:
        upstreams = []
        # A tape replay that never goes live needs no key: it reaches no one.
        keyless = self.player is not None and not self.player.then_live
        for provider in self.needs.providers:
            key = "" if keyless else os.environ.get(provider.key_env, "")
            if not key and not keyless:
                raise MissingKey(
                    f"provider {provider.name}'s key variable ${provider.key_env} "
                    "is not set on this worker"
                )
            upstreams.append(
                Upstream(
                    name=provider.name,
                    kind=provider.kind,
                    base_url=provider.base_url,
                    key=key,
                    prices=provider.prices or {},
                )
            )
        socket_path = self.directory / MODEL_SOCKET
        self.recorder = TapeRecorder(
            exchange_bytes=settings.REPLAYHUB_TAPE_EXCHANGE_BYTES,
            tape_bytes=settings.REPLAYHUB_TAPE_BYTES,
        )
        self.gateway = self._stack.enter_context(
            ModelGateway(
                socket_path,
                upstreams,
                self.placeholder,
                self.caps,
                max_kept=settings.REPLAYHUB_EVIDENCE_KEPT,
                recorder=self.recorder,
                player=self.player,
            )
        )
        self._ports[MODEL_PORT] = MODEL_SOCKET
        base = f"http://127.0.0.1:{MODEL_PORT}"
        chosen: dict[str, Provider] = {}
        for provider in self.needs.providers:
            if (
                provider.name == self.needs.recorded_provider
                or provider.kind not in chosen
            ):
                chosen[provider.kind] = provider
        for kind, provider in chosen.items():
            if kind == "anthropic":
                self.env["ANTHROPIC_BASE_URL"] = f"{base}/{provider.name}"
                self.env["ANTHROPIC_API_KEY"] = self.placeholder
            elif kind == "gemini":
                # Gemini's SDK adds the API version to the base URL itself.
                self.env["GOOGLE_GEMINI_BASE_URL"] = f"{base}/{provider.name}"
                self.env["GEMINI_API_KEY"] = self.placeholder
            else:
                self.env["OPENAI_BASE_URL"] = f"{base}/{provider.name}/v1"
                self.env["OPENAI_API_KEY"] = self.placeholder
        main = next(
            (p for p in self.needs.providers if p.name == self.needs.recorded_provider),
            self.needs.providers[0],
        )
        self.env["REPLAYHUB_MODEL_BASE_URL"] = f"{base}/{main.name}"
        self.env["REPLAYHUB_MODEL_PROVIDER"] = main.name
        self.env["REPLAYHUB_MODEL_API_KEY"] = self.placeholder

    def _start_proxy(self) -> None:
        socket_path = self.directory / EGRESS_SOCKET
        self.proxy = self._stack.enter_context(
            EgressProxy(
                socket_path,
                list(self.needs.egress),
                self.phase,
                max_kept=settings.REPLAYHUB_EVIDENCE_KEPT,
            )
        )
        self._ports[EGRESS_PORT] = EGRESS_SOCKET
        self.env.update(proxy_env(EGRESS_PORT))


def caps_for(project: Project, caps: dict) -> Caps:
    """The gateway's caps for one replay: the admitted caps, then the project's."""
    tokens = caps.get("max_tokens") or project.max_tokens
    money = project.max_cost_usd
    return Caps(
        max_tokens=int(tokens) if tokens else None,
        max_cost_usd=Decimal(money) if money is not None else None,
        max_requests=project.max_requests,
    )


def run_phase(
    runner: Runner,
    spec: SandboxSpec,
    *,
    needs: Needs,
    directory: Path,
    phase: str,
    caps: Caps | None = None,
    loopback_direct: bool = True,
    cap_grace: float | None = None,
    player: TapePlayer | None = None,
) -> tuple[SandboxOutcome, PhaseNetwork | None]:
    """Run ``spec`` with the phase's way out, when it needs one.

    The network comes back stopped, holding what it recorded (model calls,
    egress attempts, a cap that fired); None when the phase needed none.
    ``loopback_direct`` False sends loopback through the proxy as well, so a
    service on the worker's own 127.0.0.1 is allowed or refused like any host.
    With ``cap_grace``, the run is ended that many seconds after a cap first
    refused a model call (an agent only retries then, burning sandbox time).
    With a ``player`` the gateway answers from its tape (a tape replay).
    """
    if not needs:
        return runner.run(spec), None
    with PhaseNetwork(
        directory=directory,
        needs=needs,
        phase=phase,
        caps=caps or Caps(None, None, None),
        player=player,
    ) as network:
        env = {
            k: v
            for k, v in network.env.items()
            if loopback_direct or k.lower() != "no_proxy"
        }
        binds = spec.binds if network.bind is None else (*spec.binds, network.bind)
        stop = spec.stop or threading.Event()
        watching = (
            network.stop_after_cap(stop, cap_grace) if cap_grace is not None else None
        )
        try:
            outcome = runner.run(
                replace(
                    spec,
                    argv=network.wrap(spec.argv),
                    env={**spec.env, **env},
                    binds=binds,
                    stop=stop,
                )
            )
        finally:
            if watching is not None:
                watching.set()
    return outcome, network
