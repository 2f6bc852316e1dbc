"""The dashboard's filters: the query string's form and the filters it yields."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from replayhub.models import RunSource
from reviews.forms import ScopeFilterForm

NIGHTS_SHOWN = 56
# About two years: past that the bars get thinner than a pixel.
MAX_NIGHTS = 731


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
        return data

    @property
    def narrowed(self) -> bool:
        """Whether rows are filtered below the project, where deferrals (a
        project's count) are not known."""
        return bool(self.model or self.source)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project or None,
            "model": self.model or None,
            "source": self.source or None,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
        }


def default_window(until: date | None = None) -> tuple[date, date]:
    until = until or timezone.localdate()
    return until - timedelta(days=NIGHTS_SHOWN - 1), until


class TrendsFilterForm(ScopeFilterForm):
    """The dashboard's query string. Empty dates: the last 56 nights."""

    since = forms.DateField(required=False, input_formats=["%Y-%m-%d"])
    until = forms.DateField(required=False, input_formats=["%Y-%m-%d"])
    source = forms.ChoiceField(
        choices=[("", "All sources"), *RunSource.choices], required=False
    )

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        since, until = data.get("since"), data.get("until")
        if since and until:
            if since > until:
                self.add_error("until", "The last night is before the first.")
            elif (until - since).days + 1 > MAX_NIGHTS:
                self.add_error("since", f"Show at most {MAX_NIGHTS} nights at once.")
        return data

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
        )
