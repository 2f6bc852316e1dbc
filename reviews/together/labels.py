"""Labels: the structured part of a decision (yes/no, 1-5, a category).

A project's admin defines them (its Review settings page); the decision
form grows one field per label, and a required label blocks a confirm or an
overturn until it is set.
"""

from __future__ import annotations

from collections import Counter

from django import forms
from django.db.models import QuerySet

from reviews.forms import DecisionForm
from reviews.models import Label, Review, ReviewLabel

# The keys that set a project's labels, in the labels' order: none of them is
# taken by the replay page (c o r z n u j k e ? and the digits).
LABEL_KEYS = "asdfghqwtyxvbmpil"


def project_labels(project_id: int) -> list[Label]:
    return list(Label.objects.filter(project_id=project_id))


class LabelledDecisionForm(DecisionForm):
    """The decision form with one choice field per label of the project."""

    def __init__(self, *args, labels: list[Label] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.labels = labels or []
        for label in self.labels:
            self.fields[self.field_name(label)] = forms.ChoiceField(
                label=label.name,
                choices=[("", "—"), *label.choices()],
                required=False,
            )

    @staticmethod
    def field_name(label: Label) -> str:
        return f"label_{label.pk}"

    def label_fields(self) -> list:
        """(bound field, label, key) triples, in the project's order; the key
        is empty past the last one there is."""
        keys = [*LABEL_KEYS, *[""] * max(0, len(self.labels) - len(LABEL_KEYS))]
        return [
            (self[self.field_name(label)], label, key)
            for label, key in zip(self.labels, keys, strict=False)
        ]

    def clean(self):
        data = super().clean()
        if data.get("decision") in (Review.Decision.CONFIRM, Review.Decision.OVERTURN):
            for label in self.labels:
                if label.required and not data.get(self.field_name(label)):
                    self.add_error(
                        self.field_name(label), f"Set the label “{label.name}”."
                    )
        return data

    def errors_above(self) -> list[str]:
        """The errors said above the form: all but a label's, which its label
        shows beside itself."""
        beside = {self.field_name(label) for label in self.labels}
        return [
            str(error)
            for name, errors in self.errors.items()
            if name not in beside
            for error in errors
        ]

    def label_values(self) -> dict[int, str]:
        data = getattr(self, "cleaned_data", {})
        return {
            label.pk: value
            for label in self.labels
            if (value := data.get(self.field_name(label)))
        }


def labels_save(*, review, values: dict[int, str]) -> None:
    ReviewLabel.objects.bulk_create(
        [
            ReviewLabel(review=review, label_id=label_id, value=value)
            for label_id, value in values.items()
        ]
    )


def label_counts(reviews: QuerySet) -> list[dict]:
    """How often each label value was given on ``reviews``, by label then value."""
    rows = ReviewLabel.objects.filter(review__in=reviews.values("pk")).values_list(
        "label__project__slug", "label__name", "value"
    )
    counts = Counter(rows)
    return [
        {"project": project, "label": name, "value": value, "count": n}
        for (project, name, value), n in sorted(counts.items())
    ]
