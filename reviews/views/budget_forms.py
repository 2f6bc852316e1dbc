"""The budgets page's forms: the night's budget, each tier's share, the
replicate policy and the replay's caps, each number checked against its bounds."""

from __future__ import annotations

from decimal import Decimal
from zoneinfo import available_timezones

from django import forms
from django.utils.text import capfirst

from replayhub.models import Budget, BudgetShare, Project
from replayhub.models.project_settings import SETTING, bound_problem, long_tests_problem
from replayhub.nights import shares, tiers
from replayhub.replicates.stopping import MOST_REPLICATES, ReplicatePolicy
from replayhub.texttier.replay import BadTarget, NoSuchProvider, resolve
from reviews import services
from reviews.forms import unbounded, unclipped
from reviews.project_services import REPLICATE_FIELDS

# Every number an admin types has a floor and a sane ceiling, with its unit
# for the message: (least, most, unit). A ceiling catches a slipped digit
# before it reaches the scheduler.
BUDGET_BOUNDS: dict[str, tuple[int, int, str]] = {
    "window_start_hour": (0, 23, ""),
    "window_end_hour": (0, 23, ""),
    "text_score_at_most": (0, 32_767, ""),
}
SHARE_BOUNDS: dict[str, tuple[int, int, str]] = {
    "max_replays": (0, 100_000, " replays"),
    "max_sandbox_minutes": (0, 10_000_000, " minutes"),
    "max_tokens": (0, 100_000_000_000, " tokens"),
    "max_cost_usd": (0, 1_000_000, " USD"),
}
SHARE_LABELS = {
    "max_replays": "Replays per night",
    "max_sandbox_minutes": "Sandbox minutes per night",
    "max_tokens": "Tokens per night",
    "max_cost_usd": "Money per night (USD)",
}
# The names of budget fields in audit events recorded before the tiers' shares
# were rows; their events still show.
LEGACY_LABELS = {
    **SHARE_LABELS,
    "tape_max_replays": "Tape replays per night",
    "tape_max_sandbox_minutes": "Tape sandbox minutes per night",
    "text_max_replays": "Text replays per night",
    "text_max_tokens": "Text tokens per night",
    "text_max_cost_usd": "Text money per night (USD)",
}
MONEY = {"max_cost_usd", "text_max_cost_usd"}
# How each tier is named on the card, in admission order.
TIER_TITLES = {
    tiers.TAPE: "Tape tier, before the others",
    tiers.TEXT: "Text tier, before the agentic tier",
    tiers.AGENTIC: "Agentic tier",
    tiers.REPLICATE: "Replicates, after the first replays",
}
# The replay's caps keep the bounds of the one table of replay settings.
CAP_BOUNDS: dict[str, tuple[int, int, str]] = {
    name: SETTING[name].bounds for name in services.CAP_FIELDS if name in SETTING
}


def as_typed(amount):
    """A stored amount as a person writes it: ``Decimal("20.00")`` as
    ``"20"``, ``Decimal("3.50")`` as ``"3.5"``; anything else unchanged."""
    if not isinstance(amount, Decimal) or not amount.is_finite():
        return amount
    return f"{amount.normalize():f}"


class BoundedForm(forms.ModelForm):
    """A model form whose numbers are checked against ``bounds``, field by field."""

    bounds: dict[str, tuple[int, int, str]] = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A number's bounds are ``bounds``', said by ``bound_problem`` in one
        # message for every value out of range, as on the project form.
        for name in self.bounds:
            if name in self.fields:
                unbounded(self.fields[name])
        # The column keeps two places; the box shows the amount as an admin
        # types it (20 rather than 20.00, 3.5 rather than 3.50). A refused
        # post shows what was typed, unchanged.
        if not self.is_bound:
            for name in MONEY & set(self.fields):
                self.initial[name] = as_typed(self.initial.get(name))

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        for name, (least, most, unit) in self.bounds.items():
            if name not in self.fields or name in self.errors:
                continue
            if problem := bound_problem(data.get(name), least, most, unit):
                self.add_error(name, problem)
        return data


# The longest category, as a review label's category may be (``Label.clean``).
CATEGORY_CHARS = 80


class CategoriesField(forms.CharField):
    """Record categories as one line, names separated by commas: a list saved.
    No maxlength for the browser to cut a paste short with: each name's
    length is said by the form, what was typed kept in the box."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [name.strip() for name in text.split(",") if name.strip()]

    def validate(self, value) -> None:
        super().validate(value)
        if long := next((n for n in value if len(n) > CATEGORY_CHARS), None):
            raise forms.ValidationError(
                f"A category is at most {CATEGORY_CHARS} characters: "
                f"“{long[:20]}…” has {len(long):,}."
            )


# The text tier's settings (the model checks them, as the admin does).
TEXT_FIELDS = [name for name in services.BUDGET_FIELDS if name.startswith("text_")] + [
    "agentic_after_text",
    "escalate_categories",
]


class BudgetForm(BoundedForm):
    """The night's window, which tiers run and the text tier's settings;
    each tier's limits are its ``ShareForm``."""

    bounds = BUDGET_BOUNDS
    escalate_categories = CategoriesField(
        required=False,
        label="Text tier: categories always escalated",
        help_text="Record categories that go on to the agentic tier whatever "
        "the text tier found, separated by commas, e.g. security, payments.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("text_target", "text_judge", "escalate_categories"):
            self.fields[name].widget.attrs.update(size=22)
        # No maxlength for the browser to cut a paste short with: the form
        # says a model name too long, with its count.
        for field in self.fields.values():
            if isinstance(field, forms.CharField):
                unclipped(field)
        # Any similarity from 0 to 1 (0.33 too), said by the form, not the
        # browser's bubble, like every other number on the page.
        self.fields["text_similarity_below"].widget.attrs.update(step="any")

    class Meta:
        model = Budget
        fields = services.BUDGET_FIELDS
        labels = {
            "window_start_hour": "Window starts (hour)",
            "window_end_hour": "Window ends (hour)",
            "tape_enabled": "Tape tier first (runs with a tape)",
            "text_enabled": "Text tier first (runs with prompts)",
            "text_target": "Text tier: model asked",
            "text_judge": "Text tier: judge (optional)",
            "agentic_after_text": "Agentic replay only after the text tier",
            "text_similarity_below": "Text tier: escalate below similarity (0-1)",
            "text_score_at_most": "Text tier: escalate at judge score at most",
            "escalate_categories": "Text tier: categories always escalated",
        }

    def _check_providers(self, data: dict) -> None:
        """The models the text tier asks name registered providers, as the
        night resolves them (a call to any other could never be sent): each
        one typed, and both while the tier is on. A value that is not
        PROVIDER:MODEL is the model's to refuse, in its own words."""
        typed = self.add_prefix("text_target") in self.data
        for name in ("text_target", "text_judge"):
            if not data.get(name) or name in self.errors:
                continue
            if not data.get("text_enabled") and not (
                typed and name in self.changed_data
            ):
                continue
            try:
                # Saved as the provider spells its own name, in whatever
                # case it was typed.
                data[name] = str(resolve(data[name]))
            except NoSuchProvider as exc:
                # The model's own check then reads what was typed, not the
                # saved value (which would have it ask for a target at all).
                setattr(self.instance, name, data[name])
                self.add_error(name, f"{capfirst(str(exc))}.")
            except BadTarget:
                pass  # Not PROVIDER:MODEL: the model's check says so, once.

    def clean_text_similarity_below(self):
        value = self.cleaned_data.get("text_similarity_below")
        if value is not None and not 0 <= value <= 1:
            raise forms.ValidationError("Give a similarity from 0 to 1.")
        return value

    def clean_timezone(self) -> str:
        name = self.cleaned_data["timezone"]
        if name not in available_timezones():
            raise forms.ValidationError(f"{name!r} is not a known time zone.")
        return name

    def clean(self):
        data = super().clean()
        if self.add_prefix("text_target") not in self.data:
            # A post without the text tier's fields (an older page) keeps them.
            for name in TEXT_FIELDS:
                data[name] = getattr(self.instance, name)
                self.errors.pop(name, None)
        self._check_providers(data)
        start, end = data.get("window_start_hour"), data.get("window_end_hour")
        if (
            start is not None
            and start == end
            and "window_end_hour" not in self.errors
            and "window_start_hour" not in self.errors
        ):
            self.add_error(
                "window_end_hour",
                "The window must last at least one hour: it starts and ends at "
                f"{start}:00.",
            )
        return data


class ShareForm(BoundedForm):
    """One tier's share of the night: only the dimensions the tier budgets,
    money only for those who may see it. A field left blank (or out of an
    older client's post) keeps the saved value."""

    bounds = SHARE_BOUNDS

    class Meta:
        model = BudgetShare
        fields = list(shares.SHARE_FIELD.values())
        labels = SHARE_LABELS

    def __init__(self, *args, tier: str, show_money: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.tier = tier
        mine = set(shares.share_fields(tier))
        for name in list(self.fields):
            if name not in mine or (name == "max_cost_usd" and not show_money):
                del self.fields[name]
            else:
                self.fields[name].required = False

    @property
    def title(self) -> str:
        return TIER_TITLES[self.tier]

    def clean(self):
        data = super().clean()
        for name in self.fields:
            if data.get(name) is None and name not in self.errors:
                data[name] = getattr(self.instance, name)
        return data


class ReplicateForm(forms.ModelForm):
    """The replicate policy (``Budget.replicate_policy``): the model checks
    it whole. An empty threshold turns replicates off."""

    class Meta:
        model = Budget
        fields = REPLICATE_FIELDS
        labels = {
            "replicate_threshold": "Reproduces at least (p0, 0-1)",
            "replicate_confidence": "Confidence (0-1)",
            "replicate_most": "Most samples a run (k)",
            "replicate_margin": "Margin around p0",
        }

    # Each number's open interval, as the policy (and the table's
    # constraint) takes it: said beside the field, and the browser's bounds.
    BOUNDS = {
        "replicate_threshold": (0, 1),
        "replicate_confidence": (0, 1),
        "replicate_margin": (0, 0.5),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            field.required = False
            if name in self.BOUNDS:
                low, high = self.BOUNDS[name]
                field.widget.attrs.update(min=low, max=high, step="any")
        self.fields["replicate_most"].widget.attrs.update(min=1, max=MOST_REPLICATES)

    def clean(self):
        data = super().clean()
        assert data is not None
        for name, (low, high) in self.BOUNDS.items():
            value = data.get(name)
            if value is not None and not low < value < high:
                self.add_error(name, f"Give a number between {low} and {high}.")
        for name in self.fields:
            # Left out of an older client's post, or blank (the threshold
            # aside, whose blank is "off"): the saved value stays.
            missing = self.add_prefix(name) not in self.data
            if missing or (data.get(name) is None and name != "replicate_threshold"):
                data[name] = getattr(self.instance, name)
        most = data.get("replicate_most")
        # The first replay is the first sample: at most one leaves no
        # replicate that could ever run.
        if (
            data.get("replicate_threshold") is not None
            and most is not None
            and most < 2
            and "replicate_most" not in self.errors
        ):
            self.add_error(
                "replicate_most",
                f"Give at least 2 samples: with {most}, a run's first "
                "replay is all it gets and no replicate ever runs.",
            )
        return data

    def policy(self) -> ReplicatePolicy | None:
        return self.instance.replicate_policy()


def refuse_idle_agentic(caps_form: CapsForm, share_forms: list[ShareForm]) -> None:
    """The agentic tier on with no replay a night: every replay it admits,
    and every Replay now, would be refused as over budget."""
    agentic = next(f for f in share_forms if f.tier == tiers.AGENTIC)
    if not (caps_form.is_valid() and agentic.is_valid()):
        return
    if caps_form.cleaned_data.get("agentic_enabled") and (
        agentic.cleaned_data.get("max_replays") == 0
    ):
        agentic.add_error(
            "max_replays",
            "The agentic tier is on: give it at least 1 replay a night "
            "(with 0, every replay, Replay now too, is over budget).",
        )


def refuse_long_tests(caps_form: CapsForm, share_forms: list[ShareForm]) -> None:
    """A test run longer than the agentic share's whole night of sandbox
    time (``long_tests_problem``), both as this post would save them."""
    agentic = next(f for f in share_forms if f.tier == tiers.AGENTIC)
    if not (caps_form.is_valid() and agentic.is_valid()):
        return
    caps, minutes = caps_form.cleaned_data, agentic.cleaned_data["max_sandbox_minutes"]
    if problem := long_tests_problem(
        caps["test_time_limit_seconds"], caps["time_limit_seconds"], minutes * 60
    ):
        caps_form.add_error("test_time_limit_seconds", problem)


class CapsForm(BoundedForm):
    bounds = CAP_BOUNDS

    class Meta:
        model = Project
        fields = services.CAP_FIELDS
        labels = {
            "agentic_enabled": "Agentic replays by the scheduler",
            "time_limit_seconds": "Agent time limit (s)",
            "test_time_limit_seconds": "Test run time limit (s)",
            "memory_limit_mb": "Memory (MiB)",
            "max_processes": "Processes",
            "max_disk_mb": "Disk (MiB)",
            "max_files": "Files",
            "max_tokens": "Tokens per replay",
            "max_turns": "Turns per replay",
        }
