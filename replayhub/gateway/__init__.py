"""A replay's ways out of the sandbox: the model gateway (``server``, speaking
the provider APIs of ``wire``) and the egress proxy (``egress``)."""

from __future__ import annotations

from replayhub.gateway.calls import Caps, MeteredCall, Totals
from replayhub.gateway.providers import Upstream
from replayhub.gateway.server import ModelGateway

__all__ = ["Caps", "MeteredCall", "ModelGateway", "Totals", "Upstream"]
