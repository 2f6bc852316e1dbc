"""The dashboard's filters: the query string's form and the filters it yields."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django import forms
from django.forms.utils import pretty_name
from django.utils import timezone

from replayhub.models import RunSource, Tier
from reviews.forms import ScopeFilterForm
from reviews.trends.series import TIER_LABELS

NIGHTS_SHOWN = 56
# About two years: past that the bars get thinner than a pixel.
MAX_NIGHTS = 731
# No night before this one was ever replayed: an earlier date is a typo.
EARLIEST_NIGHT = date(2000, 1, 1)


@dataclass(frozen=True)
class TrendFilters:
    """What the dashboard shows: nights ``since``..``until`` inclusive."""

    since: date
    until: date
    project_id: int | None = None
    project: str = ""
    model: str = ""
    # "" for every source, else a ``RunSource``: code runs or rollouts.
    source: str = ""
    # "" for every tier, else a ``Tier`` of the rollups: agentic or tape.
    tier: str = ""
    # Projects left out: those a viewer who decides reviews blind (a night's
    # counts of a project would tell the verdicts of its replays).
    hidden_project_ids: frozenset[int] = frozenset()

    @property
    def nights(self) -> int:
        return (self.until - self.since).days + 1

    def query(self) -> dict[str, str]:
        """The filters as a query string, defaults spelled out."""
        data = {"since": self.since.isoformat(), "until": self.until.isoformat()}
        if self.project:
            data["project"] = self.project
        if self.model:
            data["model"] = self.model
        if self.source:
            data["source"] = self.source
        if self.tier:
            data["tier"] = self.tier
        return data

    @property
    def narrowed(self) -> bool:
        """Whether rows are filtered below the project, where deferrals (a
        project's count) are not known."""
        return bool(self.model or self.source or self.tier)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project or None,
            "model": self.model or None,
            "source": self.source or None,
            "tier": self.tier or None,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
        }


ROLLUP_TIERS = tuple(TIER_LABELS)
TIER_CHOICES = [
    ("", "All tiers"),
    *TIER_LABELS.items(),
    (Tier.TEXT.value, "text (similarity; not reproductions)"),
]


def default_window(until: date | None = None) -> tuple[date, date]:
    until = until or timezone.localdate()
    return until - timedelta(days=NIGHTS_SHOWN - 1), until


class TrendsFilterForm(ScopeFilterForm):
    """The dashboard's query string. Empty dates: the last 56 nights."""

    # The labels are the page's, so each refusal names the filter it is about.
    since = forms.DateField(
        label="First night", required=False, input_formats=["%Y-%m-%d"]
    )
    until = forms.DateField(
        label="Last night", required=False, input_formats=["%Y-%m-%d"]
    )
    source = forms.ChoiceField(
        label="Source",
        choices=[("", "All sources"), *RunSource.choices],
        required=False,
    )
    # The rollups' tiers, and the text tier's similarity (its own rows: the
    # charts then count every tier).
    tier = forms.ChoiceField(label="Tier", choices=TIER_CHOICES, required=False)

    def _not_too_early(self, name: str) -> date | None:
        night = self.cleaned_data.get(name)
        if night and night < EARLIEST_NIGHT:
            raise forms.ValidationError(
                f"Pick a night from {EARLIEST_NIGHT.isoformat()} on."
            )
        return night

    def clean_since(self) -> date | None:
        return self._not_too_early("since")

    def clean_until(self) -> date | None:
        return self._not_too_early("until")

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        since, until = data.get("since"), data.get("until")
        if since and until:
            if since > until:
                self.add_error("until", "It is before the first night.")
            elif (until - since).days + 1 > MAX_NIGHTS:
                self.add_error("since", f"Show at most {MAX_NIGHTS} nights at once.")
        if self.has_error("since") or self.has_error("until"):
            # One date alone would place the other: both take their defaults.
            data.pop("since", None)
            data.pop("until", None)
        return data

    def _label(self, name: str) -> str:
        return str(self.fields[name].label or pretty_name(name))

    def refusals(self) -> list[str]:
        """Each refusal as "<the filter's label>: <why>"."""
        return [
            f"{self._label(name)}: {message}" if name in self.fields else str(message)
            for name, messages in self.errors.items()
            for message in messages
        ]

    def defaulted(self) -> list[str]:
        """The labels of the filters shown at their defaults instead."""
        names = set(self.errors)
        if names & {"since", "until"}:
            names |= {"since", "until"}
        return [self._label(name) for name in self.fields if name in names]

    def filters(self) -> TrendFilters:
        """The valid filters; a field that failed validation takes its default."""
        data = getattr(self, "cleaned_data", {})
        project, model = self.scope()
        until = data.get("until")
        since = data.get("since")
        if since and not until:
            until = min(since + timedelta(days=NIGHTS_SHOWN - 1), timezone.localdate())
            until = max(until, since)
        default_since, until = default_window(until)
        since = since or default_since
        return TrendFilters(
            since=since,
            until=until,
            project_id=project.pk if project else None,
            project=project.slug if project else "",
            model=model,
            source=data.get("source", ""),
            tier=data.get("tier", "") if data.get("tier") in ROLLUP_TIERS else "",
        )

    @property
    def text_tier(self) -> bool:
        """Whether the text tier's similarity is asked for (``?tier=text``)."""
        return getattr(self, "cleaned_data", {}).get("tier") == Tier.TEXT
