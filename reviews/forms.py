from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinValueValidator,
)
from django.db.models import Q

from replayhub import roles
from replayhub.lib.pasted import looks_like_key
from replayhub.models import VERDICT_CHOICES, Project
from replayhub.verdicts import REASON_TEXT, Verdict
from reviews.models import Review
from reviews.queue_reads import Cursor, QueueFilters
from reviews.replay_page.overrule import contradicted
from reviews.together.forms import label_choices, split_label


def choices_of(field: forms.Field) -> Iterable[tuple[Any, Any]]:
    """A choice field's choices as pairs (or named groups)."""
    # Django normalises choices when they are set: a list of pairs, or an iterator
    # of them for a callable. The stubs' getter type still admits every input form.
    return cast("Iterable[tuple[Any, Any]]", cast(forms.ChoiceField, field).choices)


def unbounded(field: forms.Field) -> forms.Field:
    """``field`` without its own bounds (Django's words, the browser's
    min/max): the form's check says a value out of range, in one message."""
    field.validators = [
        validator
        for validator in field.validators
        if not isinstance(validator, (MinValueValidator, MaxValueValidator))
    ]
    for bound in ("min", "max"):
        field.widget.attrs.pop(bound, None)
    return field


def unclipped(field: forms.CharField) -> forms.CharField:
    """``field`` without the browser's maxlength, which cuts a longer paste
    short without a word (and what is sent is then not what was pasted); its
    length is checked on the server instead, in one short message that never
    repeats the value: "At most 64 characters (this one has 120)."."""
    field.validators = [
        MaxLengthValidator(
            validator.limit_value,
            "At most %(limit_value)d characters (this one has %(show_value)d).",
        )
        if isinstance(validator, MaxLengthValidator)
        else validator
        for validator in field.validators
    ]
    field.widget.attrs.pop("maxlength", None)
    return field


class ForgetsPastedKeys(forms.Form):
    """A form whose ``variable_fields`` ask for a variable's name: one that
    holds what looks like a key is shown again empty, never with the key (the
    check that refuses it says so in words)."""

    variable_fields: tuple[str, ...] = ()

    def full_clean(self) -> None:
        super().full_clean()
        pasted = [
            self.add_prefix(name)
            for name in self.variable_fields
            if looks_like_key(str(self.data.get(self.add_prefix(name), "")))
        ]
        if pasted:
            # A QueryDict (copied: the request's is immutable) or a plain dict.
            data = self.data.copy()  # type: ignore[attr-defined]
            for name in pasted:
                data[name] = ""
            self.data = data


class ScopeFilterForm(forms.Form):
    """The project and model filters the queue and the trends page share."""

    project = forms.ModelChoiceField(
        queryset=Project.objects.only("id", "slug"),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
    )
    model = forms.CharField(required=False, max_length=200)

    def clean_model(self) -> str:
        return self.cleaned_data["model"].strip()

    def scope(self) -> tuple[Project | None, str]:
        """The valid project and model; a field that failed validation is empty."""
        data = getattr(self, "cleaned_data", {})
        return data.get("project"), data.get("model", "")


class QueueFilterForm(ScopeFilterForm):
    """The queue's query string: filters that combine, and the page cursor."""

    verdict = forms.ChoiceField(
        choices=[("", "Queue (by band)"), *VERDICT_CHOICES], required=False
    )
    reason = forms.ChoiceField(
        choices=[("", "Any reason"), *((str(k), v) for k, v in REASON_TEXT.items())],
        required=False,
    )
    label = forms.ChoiceField(choices=label_choices, required=False)
    # "me", "nobody" or a reviewer's username.
    assigned = forms.CharField(required=False, max_length=150)
    after = forms.CharField(required=False, widget=forms.HiddenInput)

    ME = "me"
    NOBODY = "nobody"

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def assignees(self) -> list[tuple[str, str]]:
        """The choices of the "Assigned to" filter: the viewer when they
        decide, nobody, and each other user who may decide (whom a replay can
        be handed to), read in one query."""
        app_label, codename = roles.DECIDE.split(".")
        by_group = Q(
            groups__permissions__codename=codename,
            groups__permissions__content_type__app_label=app_label,
        )
        by_user = Q(
            user_permissions__codename=codename,
            user_permissions__content_type__app_label=app_label,
        )
        names = list(
            get_user_model()
            .objects.filter(
                Q(is_active=True) & (by_group | by_user | Q(is_superuser=True))
            )
            .order_by("username")
            .values_list("username", flat=True)
            .distinct()
        )
        me = self.user.get_username() if self.user is not None else ""
        mine = [(self.ME, "Me")] if me in names else []
        named = [(name, name) for name in names if name != me]
        return [("", "Anyone"), *mine, (self.NOBODY, "Nobody"), *named]

    def clean_assigned(self) -> str:
        text = self.cleaned_data["assigned"].strip()
        if text in ("", self.ME, self.NOBODY):
            return text
        if not get_user_model().objects.filter(username=text).exists():
            raise forms.ValidationError(f"No user is named {text}.")
        return text

    def _assignee_id(self, assigned: str) -> int | None:
        if assigned == self.ME:
            return self.user.pk if self.user is not None else None
        if assigned and assigned != self.NOBODY:
            user = get_user_model().objects.filter(username=assigned).first()
            return user.pk if user is not None else None
        return None

    def clean_after(self) -> Cursor | None:
        text = self.cleaned_data["after"]
        if not text:
            return None
        try:
            return Cursor.decode(text)
        except ValueError:
            raise forms.ValidationError("That page link is not valid.") from None

    def filters(self) -> QueueFilters:
        """The valid filters; a field that failed validation filters nothing."""
        data = getattr(self, "cleaned_data", {})
        project, model = self.scope()
        label_id, label_value = split_label(data.get("label", ""))
        assigned = data.get("assigned", "")
        return QueueFilters(
            project_id=project.pk if project else None,
            model=model,
            verdict=data.get("verdict", ""),
            reason_code=data.get("reason", ""),
            label_id=label_id,
            label_value=label_value,
            assignee_id=self._assignee_id(assigned),
            unassigned=assigned == self.NOBODY,
        )

    def cursor(self) -> Cursor | None:
        return getattr(self, "cleaned_data", {}).get("after")

    # A value a filter does not take, said in the queue's words (Django's
    # "Select a valid choice" names no filter), with what is shown instead.
    UNKNOWN = {
        "project": "No project is called “{value}”; showing every project.",
        "verdict": "“{value}” is not a verdict; showing the queue by band.",
        "reason": "“{value}” is not a reason; showing every reason.",
        "label": "“{value}” is not a label value; showing every label.",
    }
    # The most of a refused value said back: each refusal stays one line.
    SAID_LONGEST = 40

    def refusals(self) -> list[str]:
        """Each refused filter as one sentence, in the fields' order."""
        said = []
        for name, errors in self.errors.as_data().items():
            for error in errors:
                if error.code == "invalid_choice" and name in self.UNKNOWN:
                    value = " ".join(str(self.data.get(name, "")).split())
                    if len(value) > self.SAID_LONGEST:
                        value = value[: self.SAID_LONGEST - 1] + "…"
                    said.append(self.UNKNOWN[name].format(value=value))
                else:
                    said.extend(error.messages)
        return said


class VerdictSelect(forms.Select):
    """The corrected verdict's select; each option carries its key and, when
    choosing it would overrule verified evidence, the sentence saying so."""

    contradictions: dict[str, str] = {}

    def create_option(
        self,
        name: str,
        value: Any,
        label: int | str,
        selected: bool,
        index: int,
        subindex: int | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        option = super().create_option(
            name, value, label, selected, index, subindex, attrs
        )
        if value:
            option["attrs"]["data-key"] = VERDICT_KEYS.get(str(value), "")
            if sentence := self.contradictions.get(str(value)):
                option["attrs"]["data-contradicts"] = sentence
        return option


# Each corrected verdict's own key on the replay page; the same digit always
# means the same verdict, whichever verdict the replay has.
VERDICT_KEYS: dict[str, str] = {
    verdict: str(n) for n, verdict in enumerate(tuple(Verdict), start=1)
}


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=Review.Decision.choices)
    verdict_after = forms.ChoiceField(
        choices=[
            ("", "Choose a corrected verdict"),
            *((v, f"{VERDICT_KEYS[v]} · {label}") for v, label in VERDICT_CHOICES),
        ],
        required=False,
        label="Corrected verdict",
        widget=VerdictSelect(attrs={"data-overturn-verdict": ""}),
    )
    # Set by the second, explicit "yes" to an overturn that contradicts
    # cryptographically verified evidence.
    overrule = forms.BooleanField(required=False, widget=forms.HiddenInput)
    note = forms.CharField(
        required=False,
        max_length=4000,
        widget=forms.Textarea(
            attrs={"rows": 1, "placeholder": "Note (optional, Esc leaves the field)"}
        ),
    )

    def __init__(self, *args, verdict: str, checks=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.verdict = verdict
        widget = self.fields["verdict_after"].widget
        widget.contradictions = {}
        for v in tuple(Verdict):
            if found := contradicted(checks, v):
                widget.contradictions[v] = " ".join(found)
        # The current verdict is not a correction of itself.
        field = cast(forms.ChoiceField, self.fields["verdict_after"])
        field.choices = [c for c in choices_of(field) if c[0] != verdict]

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        if data.get("decision") == Review.Decision.OVERTURN:
            after = data.get("verdict_after")
            if not after:
                self.add_error("verdict_after", "Choose the corrected verdict.")
            elif after == self.verdict:
                self.add_error("verdict_after", "The corrected verdict must differ.")
        return data


class BackForm(forms.Form):
    """Where a refused action goes back to: a path on this site, or nowhere."""

    next = forms.CharField(required=False, max_length=2000)

    def path(self) -> str:
        back = self.cleaned_data.get("next", "") if self.is_valid() else ""
        return back if back.startswith("/") and not back.startswith("//") else ""
