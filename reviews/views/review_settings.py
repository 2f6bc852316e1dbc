"""A project's review settings, managed from the app: its review policy (blind
review, second opinions, the gold rate) and the labels its decisions carry,
added, edited and removed. The writes are ``project_services``' (audited);
those who may edit the project may change them, everyone else gets a 403.
The policy's form and a label's edit form carry the fingerprint of the
values they were opened with (``stale``): a save from a page older than
another admin's save is refused, not saved over it.

The policy's and the labels' forms are sent with htmx: a refused save (400,
409) is swapped in place, leaving no history entry that Back would have to
post again; a save taken sends the browser to the review settings. Without
JavaScript they post and redirect as any form."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from replayhub import roles
from replayhub.models import VERDICT_CHOICES, Project
from replayhub.models.project_settings import bound_problem
from reviews.forms import unbounded, unclipped
from reviews.models import Label, LabelKind, ReviewPolicy
from reviews.project_services import (
    LabelInUse,
    label_remove,
    label_save,
    label_uses,
    policy_of,
    policy_save,
)
from reviews.views import HtmxHttpRequest
from reviews.views.stale import fingerprint, refusal, stored_values

POLICY_FORM = "policy"
LABEL_FORM = "label"
# A label's values are one a line or separated by commas.
CATEGORY_SEPARATORS = str.maketrans({",": "\n", "\r": "\n"})
# A label's highest position (the column's).
MOST_POSITION = 32767


class PolicyForm(forms.ModelForm):
    """Every field of the policy an admin sets, with the model's checks."""

    second_on_verdicts = forms.MultipleChoiceField(
        label="Second reviewer on these verdicts",
        choices=VERDICT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        # The model's words, less its example (the value as JSON).
        help_text=ReviewPolicy._meta.get_field("second_on_verdicts")
        .help_text.split(", e.g.")[0]
        .rstrip(".")
        + ".",
    )

    class Meta:
        model = ReviewPolicy
        fields = [
            "blind",
            "second_on_overturn",
            "second_on_verdicts",
            "gold_rate_percent",
        ]
        labels = {
            "blind": "Blind review",
            "second_on_overturn": "Second reviewer on every overturn",
            "gold_rate_percent": "Gold rate (%)",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The model's bounds (a check constraint), said by ``clean_gold_rate_percent``
        # in the form's words, not Django's nor the browser's.
        unbounded(self.fields["gold_rate_percent"])

    def clean_gold_rate_percent(self) -> int:
        rate = self.cleaned_data["gold_rate_percent"]
        if rate is not None and rate > 100:
            raise ValidationError("At most 100: a rate out of every 100 items.")
        if problem := bound_problem(rate, 0, 100, ""):
            raise ValidationError(problem)
        return rate


class LabelForm(forms.Form):
    """A label: its values are typed as a list, checked by the model."""

    name = unclipped(
        forms.CharField(max_length=Label._meta.get_field("name").max_length)
    )
    kind = forms.ChoiceField(choices=LabelKind.choices)
    categories = forms.CharField(
        label="Categories",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="For a category list: its values, one a line or separated by commas.",
    )
    required = forms.BooleanField(
        required=False, help_text="Needed before a confirm or an overturn."
    )
    position = forms.IntegerField(
        initial=0, help_text="Labels are listed by position, then name."
    )

    def __init__(self, *args, project: Project, label: Label | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.label = label

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        others = Label.objects.filter(project=self.project, name=name)
        if self.label is not None:
            others = others.exclude(pk=self.label.pk)
        if others.exists():
            raise ValidationError(f"{self.project.slug} already has a label “{name}”.")
        return name

    def clean_position(self) -> int:
        position = self.cleaned_data["position"]
        if problem := bound_problem(position, 0, MOST_POSITION, ""):
            raise ValidationError(problem)
        return position

    def clean_categories(self) -> list[str]:
        typed = self.cleaned_data["categories"].translate(CATEGORY_SEPARATORS)
        values = [value.strip() for value in typed.split("\n")]
        return list(dict.fromkeys(value for value in values if value))

    def clean(self) -> dict:
        data = super().clean() or {}
        if "categories" not in data or "kind" not in data:
            return data
        if data["kind"] != LabelKind.CATEGORY:
            # Saved without them, they would be dropped without a word.
            if data["categories"]:
                kind = LabelKind(data["kind"]).label
                self.add_error(
                    "categories",
                    f"A {str(kind).lower()} label has no categories; choose "
                    f"“{LabelKind.CATEGORY.label}” to use them, or leave them empty.",
                )
            data["categories"] = []
        elif not data["categories"]:
            self.add_error("categories", "A category list names its values.")
            return data
        elif too_long := [c for c in data["categories"] if len(c) > 80]:
            self.add_error(
                "categories", f"“{too_long[0][:20]}…” is over 80 characters."
            )
        return data

    @classmethod
    def initial_for(cls, label: Label) -> dict:
        return {
            "name": label.name,
            "kind": label.kind,
            "categories": "\n".join(label.categories or []),
            "required": label.required,
            "position": label.position,
        }


def _next_position(project: Project) -> int:
    last = Label.objects.filter(project=project).aggregate(last=Max("position"))
    return 0 if last["last"] is None else last["last"] + 1


def _label_form(project: Project, data=None) -> LabelForm:
    return LabelForm(
        data,
        project=project,
        prefix=LABEL_FORM,
        initial={"kind": LabelKind.YES_NO, "position": _next_position(project)},
    )


def _stored_policy(project: Project) -> PolicyForm:
    """The policy's form unbound, as the stored policy fills it."""
    return PolicyForm(instance=policy_of(project), prefix=POLICY_FORM)


def _stored_label(label: Label) -> LabelForm:
    """A label's edit form unbound, as the stored label fills it."""
    return LabelForm(
        project=label.project, label=label, initial=LabelForm.initial_for(label)
    )


def _saved(form: forms.BaseForm, save) -> bool:
    """Run ``save``; a refusal of the model's goes beside its field."""
    try:
        save()
    except ValidationError as error:
        form.add_error(None, error)
        return False
    return True


def _to_the_settings(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """After a save taken: a form sent with htmx sends the browser there."""
    url = reverse("reviews:project_review", args=[project.slug])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_review(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The policy's form, the labels, and the form that adds one."""
    project = get_object_or_404(Project, slug=slug)
    data = request.POST if request.method == "POST" else None
    which = data.get("form") if data is not None else None
    # The form works on a copy: the page shows the policy as saved.
    policy_form = PolicyForm(
        data if which == POLICY_FORM else None,
        instance=policy_of(project),
        prefix=POLICY_FORM,
    )
    label_form = _label_form(project, data if which == LABEL_FORM else None)
    stale, status = None, 400
    if which == POLICY_FORM:
        with transaction.atomic():
            # The project's row locked first: the fingerprint's check and the
            # save are one, against another admin's save of the policy.
            Project.objects.select_for_update().filter(pk=project.pk).first()
            refused = refusal(
                policy_form,
                _stored_policy(project),
                f"The review policy of {project.slug}",
            )
            if refused:
                stale, status = refused
            elif policy_form.is_valid():
                values = policy_form.cleaned_data
                if _saved(
                    policy_form,
                    lambda: policy_save(
                        actor=request.user, project=project, values=values
                    ),
                ):
                    messages.success(request, f"Review policy of {project.slug} saved.")
                    return _to_the_settings(request, project)
    if which == LABEL_FORM and label_form.is_valid():
        values = label_form.cleaned_data
        if _saved(
            label_form,
            lambda: label_save(actor=request.user, project=project, values=values),
        ):
            messages.success(request, f"Label “{values['name']}” added.")
            return _to_the_settings(request, project)
    labels = Label.objects.filter(project=project).annotate(uses=Count("values"))
    return render(
        request,
        "reviews/project_review.html",
        {
            "page": "projects",
            "project": project,
            "policy": policy_of(project),
            "labels": labels,
            "policy_form": policy_form,
            # The stored values the policy's form is rendered from.
            "stored": fingerprint(stored_values([_stored_policy(project)])),
            "stale": stale,
            "label_form": label_form,
        },
        status=status if data is not None else 200,
    )


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_label_edit(
    request: HtmxHttpRequest, slug: str, label_id: int
) -> HttpResponse:
    label = get_object_or_404(Label, pk=label_id, project__slug=slug)
    project = label.project
    form = LabelForm(
        request.POST or None,
        project=project,
        label=label,
        initial=LabelForm.initial_for(label),
    )
    stale, status = None, 400
    if request.method == "POST":
        with transaction.atomic():
            # The label's row locked first: its check and its save are one.
            label = Label.objects.select_for_update().get(pk=label.pk)
            if refused := refusal(form, _stored_label(label), f"Label “{label.name}”"):
                stale, status = refused
            elif form.is_valid():
                values = form.cleaned_data
                if _saved(
                    form,
                    lambda: label_save(
                        actor=request.user, project=project, values=values, label=label
                    ),
                ):
                    messages.success(request, f"Label “{values['name']}” saved.")
                    return _to_the_settings(request, project)
    return render(
        request,
        "reviews/label_form.html",
        {
            "page": "projects",
            "project": project,
            "label": label,
            "form": form,
            "stored": fingerprint(stored_values([_stored_label(label)])),
            "stale": stale,
        },
        status=status if request.method == "POST" else 200,
    )


@require_http_methods(["GET", "POST"])
@permission_required(roles.MANAGE_PROJECTS, raise_exception=True)
def project_label_remove(
    request: HttpRequest, slug: str, label_id: int
) -> HttpResponse:
    """Asks first (GET), removes on POST; a label decisions used is kept."""
    label = get_object_or_404(Label, pk=label_id, project__slug=slug)
    problem = ""
    if request.method == "POST":
        try:
            label_remove(actor=request.user, label=label)
        except LabelInUse as exc:
            problem = str(exc)
        else:
            messages.success(request, f"Label “{label.name}” removed.")
            return redirect("reviews:project_review", slug=label.project.slug)
    return render(
        request,
        "reviews/label_remove.html",
        {
            "page": "projects",
            "project": label.project,
            "label": label,
            "uses": label_uses(label),
            "problem": problem,
        },
        status=400 if problem else 200,
    )
