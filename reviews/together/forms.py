"""Query-string forms of the Done tab, search, bulk confirm and the agreement page."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from replayhub.models import VERDICT_CHOICES, Project, Tier
from replayhub.verdicts import REASON_TEXT, Verdict
from reviews.models import Label, Review
from reviews.together.past import DoneFilters, Period, SearchFilters


class PeriodMixin(forms.Form):
    since = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "The period ends before it starts.")
        return data


class DoneForm(PeriodMixin):
    project = forms.ModelChoiceField(
        queryset=Project.objects.only("id", "slug").order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
    )
    # A part of the model's name, in any case, as on the queue and search.
    model = forms.CharField(
        max_length=200,
        required=False,
        label="Model",
        widget=forms.TextInput(
            attrs={
                "type": "search",
                "placeholder": "any",
                "size": 14,
                "list": "done-models",
            }
        ),
    )
    reviewer = forms.ModelChoiceField(
        queryset=get_user_model().objects.filter(review__isnull=False).distinct(),
        to_field_name="username",
        required=False,
        empty_label="Everyone",
    )
    decision = forms.ChoiceField(
        choices=[("", "Any decision"), *Review.Decision.choices], required=False
    )
    verdict = forms.ChoiceField(
        choices=[("", "Any verdict"), *VERDICT_CHOICES], required=False
    )
    label = forms.ChoiceField(choices=[], required=False)
    before = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, everyone: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.everyone = everyone
        if not everyone:
            del self.fields["reviewer"]
        cast(forms.ChoiceField, self.fields["label"]).choices = label_choices()

    def filters(self, user) -> DoneFilters:
        data = getattr(self, "cleaned_data", {})
        reviewer = data.get("reviewer") if self.everyone else user
        label_id, label_value = split_label(data.get("label", ""))
        return DoneFilters(
            reviewer_id=reviewer.pk if reviewer else None,
            project_id=data["project"].pk if data.get("project") else None,
            model=data.get("model", "").strip(),
            decision=data.get("decision", ""),
            verdict=data.get("verdict", ""),
            label_id=label_id,
            label_value=label_value,
            since=data.get("since"),
            until=data.get("until"),
            before_id=data.get("before"),
        )


def label_choices() -> list[tuple[str, str]]:
    """ "<label id>:<value>" for every value of every label, by project."""
    choices = [("", "Any label")]
    for label in Label.objects.select_related("project").order_by(
        "project__slug", "position", "name"
    ):
        for value, shown in label.choices():
            choices.append(
                (f"{label.pk}:{value}", f"{label.project.slug} · {label.name}: {shown}")
            )
    return choices


def split_label(text: str) -> tuple[int | None, str]:
    head, _, value = text.partition(":")
    return (int(head), value) if head.isdigit() else (None, "")


# The longest search: the search boxes take no more, a longer one is cut.
SEARCH_LONGEST = 200


class SearchForm(forms.Form):
    q = forms.CharField(max_length=SEARCH_LONGEST, required=False, label="Search")
    model = forms.CharField(max_length=200, required=False, label="Model")
    verdict = forms.ChoiceField(
        choices=[("", "Any verdict"), *VERDICT_CHOICES],
        required=False,
        label="Settled verdict",
    )
    # The reasons' names, as the queue's filter lists them: the list is every
    # reason there is, and says nothing of any one replay.
    reason = forms.ChoiceField(
        choices=[("", "Any reason"), *((str(k), v) for k, v in REASON_TEXT.items())],
        required=False,
    )
    tier = forms.ChoiceField(choices=[("", "Any tier"), *Tier.choices], required=False)

    def filters(self) -> SearchFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return SearchFilters(
            model=data.get("model", "").strip(),
            verdict=data.get("verdict", ""),
            reason=data.get("reason", ""),
            tier=data.get("tier", ""),
        )


class BulkForm(PeriodMixin):
    """A filtered set of finished, undecided replays to confirm at once."""

    project = forms.ModelChoiceField(
        queryset=Project.objects.only("id", "slug").order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
    )
    verdict = forms.ChoiceField(choices=VERDICT_CHOICES, initial=Verdict.IDENTICAL)
    reason = forms.ChoiceField(
        choices=[("", "Any reason"), *((str(k), v) for k, v in REASON_TEXT.items())],
        required=False,
    )
    expected = forms.IntegerField(required=False, widget=forms.HiddenInput)
    note = forms.CharField(max_length=500, required=False)


class AgreementForm(PeriodMixin):
    project = forms.ModelChoiceField(
        queryset=Project.objects.only("id", "slug").order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
    )

    # The period shown when none is asked for, or the one asked for is refused.
    DEFAULT_DAYS = 28

    def period_refused(self) -> bool:
        """Whether a date was refused (one that is no date, or a period ending
        before it starts): the default period is then shown whole, as the Done and
        Trends pages do, never one typed date beside a default one."""
        return self.has_error("since") or self.has_error("until")

    def period(self) -> Period:
        data = getattr(self, "cleaned_data", {})
        refused = self.period_refused()
        since = None if refused else data.get("since")
        until = (None if refused else data.get("until")) or timezone.localdate()
        if since:
            # A start alone after today: the period is that day, not reversed.
            until = max(until, since)
        else:
            since = until - timedelta(days=self.DEFAULT_DAYS - 1)
        project = data.get("project")
        return Period(
            since=since, until=until, project_id=project.pk if project else None
        )


# The POSTs of working together, each through its form: a value that is not
# what the form takes does not reach a service.


class ResolveForm(forms.Form):
    """Resolve a thread (the default) or reopen it (``resolved=0``)."""

    resolved = forms.CharField(required=False)

    def resolves(self) -> bool:
        return self.cleaned_data.get("resolved") != "0"


class SecondOpinionForm(forms.Form):
    note = forms.CharField(max_length=150, required=False, strip=True)


class GoldForm(forms.Form):
    """Mark a replay gold with its settled verdict, or unmark it (``gold=0``)."""

    gold = forms.CharField(required=False)
    verdict = forms.CharField(max_length=16, required=False)

    def unmarks(self) -> bool:
        return self.cleaned_data.get("gold") == "0"


class AssignForm(forms.Form):
    """Hand a replay's claim to ``to`` (a username), or release it (empty)."""

    to = forms.CharField(max_length=150, required=False, strip=True)


class NoticeReadForm(forms.Form):
    """Mark one notice read (``id``), or every one (no id)."""

    id = forms.IntegerField(required=False, min_value=1)
