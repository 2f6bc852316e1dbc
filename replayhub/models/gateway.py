"""Model providers an agent may reach through the gateway, and what a replay's
way out of the sandbox was used for: model calls and egress attempts."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub.gateway import tape
from replayhub.models.projects import choices_check


class ProviderKind(models.TextChoices):
    ANTHROPIC = "anthropic", "Anthropic messages API"
    OPENAI = "openai", "OpenAI-compatible (chat completions, responses)"
    GEMINI = "gemini", "Gemini generateContent API"


class Provider(models.Model):
    """An upstream model API. The key is never stored: only the name of the
    worker's environment variable that holds it."""

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=ProviderKind)
    base_url = models.URLField(
        max_length=512, help_text="The upstream API's base URL, e.g. https://api.x/v1"
    )
    key_env = models.CharField(
        max_length=128,
        help_text="Name of the environment variable on the workers that holds the "
        "key (the key itself is never stored).",
    )
    # {model: {"input": usd, "output": usd, "cached": usd}} per million tokens.
    prices = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            choices_check("kind", ProviderKind, "provider_kind_valid"),
            models.CheckConstraint(
                condition=Q(key_env__regex=r"^[A-Za-z_][A-Za-z0-9_]*$"),
                name="provider_key_env_is_a_variable_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ModelCall(models.Model):
    """One call the agent made through the gateway, as the gateway measured it."""

    replay = models.ForeignKey(
        "Replay", on_delete=models.CASCADE, related_name="model_calls"
    )
    provider = models.CharField(max_length=64)
    model_requested = models.CharField(max_length=200, blank=True)
    model_answered = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    # Null when the price table has no price for the model.
    cost_usd = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True
    )
    status = models.CharField(max_length=16)
    error = models.CharField(max_length=300, blank=True)
    streamed = models.BooleanField(default=False)
    # The worst case held back for the call before it went up, and whether the
    # usage above is that estimate (the call's own never arrived whole).
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    reserved_cost_usd = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True
    )
    usage_estimated = models.BooleanField(default=False)
    latency_ms = models.FloatField(default=0)
    started_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.provider} {self.model_requested} for replay {self.replay_id}"


class EgressAttempt(models.Model):
    """One connection the sandbox asked the egress proxy for, allowed or not."""

    replay = models.ForeignKey(
        "Replay", on_delete=models.CASCADE, related_name="egress_attempts"
    )
    phase = models.CharField(max_length=16)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    allowed = models.BooleanField()
    outcome = models.CharField(max_length=16)
    bytes_up = models.PositiveBigIntegerField(default=0)
    bytes_down = models.PositiveBigIntegerField(default=0)
    duration_ms = models.FloatField(default=0)
    started_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.phase} {self.host}:{self.port} ({self.outcome})"


class Tape(models.Model):
    """A replay's model exchanges in order (``gateway/tape``): requests
    normalised, answers as whole messages, zlib-compressed JSON, each
    exchange's sha256 beside it. Untrusted text: rendered escaped."""

    replay = models.OneToOneField(
        "Replay", on_delete=models.CASCADE, related_name="tape"
    )
    exchanges = models.PositiveIntegerField(default=0)
    # Answered from the tape a tape replay played, not by a model.
    served = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    raw_bytes = models.PositiveBigIntegerField(default=0)
    data = models.BinaryField()
    digests = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"tape of replay {self.replay_id} ({self.exchanges} exchanges)"

    def read(self) -> list[tape.Exchange]:
        return tape.unpack(bytes(self.data), limit=settings.REPLAYHUB_TAPE_BYTES * 2)

    @classmethod
    def of(cls, exchanges: list[tape.Exchange], *, truncated: bool) -> Tape:
        """An unsaved tape holding ``exchanges``."""
        return cls(
            exchanges=len(exchanges),
            served=sum(1 for e in exchanges if e.served),
            truncated=truncated,
            raw_bytes=sum(len(tape.canonical(e.to_dict())) for e in exchanges),
            data=tape.pack(exchanges),
            digests=[e.digest() for e in exchanges],
        )
