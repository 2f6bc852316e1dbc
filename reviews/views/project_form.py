"""The project form: the settings ``manage.py project_add`` takes, in the
groups the page shows, checked by the same code (``project_setup``), and
what saving an edit changed, in the form's words."""

from __future__ import annotations

import shlex

from django import forms
from django.db import models
from django.forms.utils import pretty_name

from replayhub import agents
from replayhub.models import Project, Provider
from replayhub.models.project_settings import (
    CAPS,
    PATHS,
    SANDBOX,
    SETTINGS,
    SETUP,
    TESTS,
    Setting,
)
from replayhub.project_setup import SLUG_CHARS, ProjectInvalid
from replayhub.rollouts.seeds import DRAW_FIELDS, draw_problems
from reviews.forms import ForgetsPastedKeys, unbounded, unclipped
from reviews.views.stale import fingerprint, refusal, stored_values


def _words(value: str) -> list[str]:
    return [word for word in value.split() if word]


# The form's groups, in order; the replay settings' fields are in their own.
PROJECT = "Project"
ROLLOUTS = "Rollouts"
GROUPS = (PROJECT, PATHS, CAPS, TESTS, SETUP, SANDBOX, ROLLOUTS)
GROUP_OF = {
    "allowed_paths": PATHS,
    "test_paths": PATHS,
    "setup_command": SETUP,
    "setup_inputs": SETUP,
    "egress_setup": SETUP,
    "harness_command": ROLLOUTS,
    "verifier_command": ROLLOUTS,
    "env_share_group": SETUP,
    "allow_test_interference": TESTS,
    "root_image": SANDBOX,
    "require_image_match": SANDBOX,
    **{setting.field: setting.group for setting in SETTINGS},
}
# The sandbox's settings checked apart from ``project_fields``' (by
# ``sandbox_fields``), with their labels; their help is the model's.
SANDBOX_FIELDS = {
    "env_share_group": "Environment share group",
    "allow_test_interference": "Allow test interference",
    "root_image": "Root image",
    "require_image_match": "Require the record's image",
}
# How a rollout project draws and judges its seeds, with their labels; their
# help is the model's, their check ``draw_problems``, as the commands'.
ROLLOUT_FIELDS = {
    "rollout_mode": "Rollout mode",
    "rollout_anchor": "Anchor",
    "max_anchors": "Anchors drawn per rollout",
    "rollout_seed": "Draw seed",
    "min_source_reward": "Minimum source reward",
    "max_source_reward": "Maximum source reward",
    "max_seed_tokens": "Longest seed (tokens)",
    "pass_threshold": "Pass threshold",
    "verification_turn": "Verification turn",
}
GROUP_OF.update(dict.fromkeys(ROLLOUT_FIELDS, ROLLOUTS))


def _setting_field(setting: Setting) -> forms.Field:
    """The form field of a replay setting: the model's, with the table's label."""
    if setting.kind == "globs":
        return forms.CharField(
            label=setting.label,
            required=False,
            max_length=4000,
            initial=" ".join(setting.default),
            help_text=f"{setting.help} Separated by spaces; empty: none.",
        )
    if setting.kind == "choice":
        field = setting.model_field.formfield(
            label=setting.label, help_text=setting.help
        )
        assert field is not None
        return field
    # A number's bounds are the table's, said by ``setting_problem`` in one
    # message, the same for every value out of range: neither the model
    # field's own bounds nor the browser's answer first.
    options = {
        "label": setting.label,
        "help_text": setting.help,
        "required": not setting.optional,
        "initial": setting.default,
    }
    if setting.kind == "money":
        return forms.DecimalField(decimal_places=4, **options)
    return forms.IntegerField(**options)


class ProjectForm(ForgetsPastedKeys):
    """The settings ``manage.py project_add`` takes; checked by the same code."""

    variable_fields = ("repo_credential_env",)

    # Its rule is ``slug_check``'s, in the form's words.
    slug = unclipped(forms.CharField(max_length=SLUG_CHARS))
    repo = forms.CharField(
        label="Repository",
        max_length=1000,
        help_text="A path on this host, or an https://, ssh://, git@host:path or "
        "file:// URL that each host mirrors.",
    )
    repo_credential_env = forms.CharField(
        label="Credential variable",
        required=False,
        max_length=128,
        help_text="For an https:// URL: the name of the environment variable "
        "holding its token or password on each host. Only the name is stored.",
    )
    test_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Split like a shell would; never run through one. Empty only "
        "in a project of rollouts.",
    )
    agent = forms.ChoiceField(
        choices=[
            (agents.CUSTOM, "Custom: the agent command below"),
            *(
                (p.name, f"{p.title} ({p.package} {p.version})")
                for p in agents.PROFILES.values()
            ),
        ],
        initial=agents.CUSTOM,
        # A post without it (an older page, a script) means custom.
        required=False,
        help_text="A profile is installed by the setup phase and run headless "
        "against the gateway: no agent command.",
    )
    agent_version = forms.CharField(
        label="Agent version",
        required=False,
        max_length=64,
        help_text="The profile's release to install. Empty: its pinned one.",
    )
    agent_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Split like a shell would; never run through one, so a $VAR "
        "stays as typed (sh -c '…' expands its own). Only with the custom agent.",
    )
    default_branch = forms.CharField(required=False, max_length=255)
    providers = forms.ModelMultipleChoiceField(
        queryset=Provider.objects.order_by("name"),
        to_field_name="name",
        required=False,
    )
    egress_agent = forms.CharField(
        required=False, max_length=4000, help_text="HOST:PORT, separated by spaces."
    )
    egress_tests = forms.CharField(
        required=False, max_length=4000, help_text="HOST:PORT, separated by spaces."
    )
    allowed_paths = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs separated by spaces; empty: anything.",
    )
    test_paths = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs separated by spaces; empty: the common layouts.",
    )
    setup_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Run once per environment on a clean checkout of the base; what "
        "it leaves in $REPLAYHUB_ENV_DIR is mounted read-only into every later "
        "sandbox. Empty: no setup phase.",
    )
    setup_inputs = forms.CharField(
        required=False,
        max_length=4000,
        help_text="Globs of the files whose contents key the environment, "
        "separated by spaces; empty: the common lockfiles.",
    )
    egress_setup = forms.CharField(
        required=False,
        max_length=4000,
        help_text="HOST:PORT the setup phase may reach (a package index).",
    )
    harness_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="For rollout records: runs a seed in the sandbox.",
    )
    verifier_command = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Scores a rollout replay's completion in a fresh sandbox with no "
        "network. Empty: the harness's own reward, never enough for equivalent.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for setting in SETTINGS:
            self.fields[setting.field] = _setting_field(setting)
        for name, label in {**SANDBOX_FIELDS, **ROLLOUT_FIELDS}.items():
            model_field = Project._meta.get_field(name)
            assert isinstance(model_field, models.Field)
            field = model_field.formfield(label=label)
            assert field is not None
            if name in ROLLOUT_FIELDS:
                # Its bounds are ``draw_problems``', in one message.
                unbounded(field)
                if self.is_bound and name not in self.data:
                    # A post without it (an older page, a script) keeps the value.
                    field.required = False
            self.fields[name] = field
        self.fields["rollout_mode"].help_text = (
            "continue: replays resume at an anchor; recheck: the final attempt "
            "is verified again."
        )
        self.fields["verification_turn"].widget.attrs["rows"] = 3
        # No text the browser cuts short without a word: every length is the
        # form's to say, with the count.
        for field in self.fields.values():
            if isinstance(field, forms.CharField):
                unclipped(field)

    def groups(self) -> list[tuple[str, list]]:
        """The fields to show under each group's legend, in order."""
        found: dict[str, list] = {group: [] for group in GROUPS}
        for field in self:
            found[GROUP_OF.get(field.name, PROJECT)].append(field)
        return [(group, fields) for group, fields in found.items() if fields]

    @classmethod
    def initial_for(cls, project: Project) -> dict:
        initial = {
            "slug": project.slug,
            "repo": project.repo_path,
            "repo_credential_env": project.repo_credential_env,
            "test_command": shlex.join(project.test_command),
            "agent": project.agent,
            "agent_version": project.agent_version,
            "agent_command": shlex.join(project.agent_command),
            "allowed_paths": " ".join(project.allowed_paths),
            "test_paths": " ".join(project.test_paths),
            "default_branch": project.default_branch,
            "providers": list(project.providers.all()),
            "egress_agent": " ".join(project.egress_agent),
            "egress_tests": " ".join(project.egress_tests),
            "setup_command": shlex.join(project.setup_command),
            "setup_inputs": " ".join(project.setup_inputs),
            "egress_setup": " ".join(project.egress_setup),
            "harness_command": shlex.join(project.harness_command),
            "verifier_command": shlex.join(project.verifier_command),
        }
        for setting in SETTINGS:
            value = getattr(project, setting.field)
            initial[setting.field] = (
                " ".join(value) if setting.kind == "globs" else value
            )
        for name in {**SANDBOX_FIELDS, **ROLLOUT_FIELDS}:
            initial[name] = getattr(project, name)
        return initial

    def rollout_values(self, project: Project | None) -> dict:
        """The rollout settings to save: a field the post left out (or that
        did not clean) keeps the project's value, a new project's default."""
        data = getattr(self, "cleaned_data", {})
        kept = project or Project()
        return {
            name: data[name]
            if name in self.data and name in data
            else getattr(kept, name)
            for name in ROLLOUT_FIELDS
        }

    def check_rollouts(self, project: Project | None) -> dict:
        """``rollout_values``, each problem ``draw_problems`` finds beside its
        field (where the field has none of its own already)."""
        values = self.rollout_values(project)
        found = draw_problems(**{name: values[name] for name in DRAW_FIELDS})
        for name, problem in found.items():
            if name not in self.errors:
                self.add_error(name, problem)
        return values

    def sandbox_values(self) -> dict:
        """The sandbox's settings as ``sandbox_fields`` takes them."""
        data = getattr(self, "cleaned_data", {})
        return {
            "root_image": data.get("root_image") or "",
            "require_image_match": bool(data.get("require_image_match")),
            "allow_test_interference": bool(data.get("allow_test_interference")),
            "env_share_group": data.get("env_share_group") or "",
        }

    def values(self) -> dict:
        """The cleaned values as ``project_fields`` takes them. On a form with
        errors, the fields that cleaned (a setting that did not is left out;
        the others stand in empty), so the rest can still be checked."""
        data = getattr(self, "cleaned_data", {})

        def text(name: str) -> str:
            return data.get(name) or ""

        return {
            "slug": text("slug"),
            "repo": text("repo"),
            "repo_credential_env": text("repo_credential_env"),
            "test_command": text("test_command") or None,
            "agent": data.get("agent") or agents.CUSTOM,
            "agent_version": text("agent_version").strip(),
            "agent_command": text("agent_command") or None,
            "allowed_paths": _words(text("allowed_paths")),
            "test_paths": _words(text("test_paths")) or None,
            "egress_agent": _words(text("egress_agent")),
            "egress_tests": _words(text("egress_tests")),
            "providers": [p.name for p in data.get("providers") or []],
            "default_branch": text("default_branch").strip(),
            "setup_command": text("setup_command") or None,
            "setup_inputs": _words(text("setup_inputs")) or None,
            "egress_setup": _words(text("egress_setup")),
            "harness_command": text("harness_command") or None,
            "verifier_command": text("verifier_command") or None,
            "settings": {
                setting.field: _words(data[setting.field])
                if setting.kind == "globs"
                else data[setting.field]
                for setting in SETTINGS
                if setting.field in data
            },
        }

    def add_problems(self, error: ProjectInvalid) -> None:
        """Each problem beside its field, in the form's words; none where the
        field already shows one of the form's own."""
        for problem in getattr(error, "problems", [error]):
            field = problem.field if problem.field in self.fields else None
            if field is not None and field in self.errors:
                continue
            self.add_error(field, problem.detail)


def stored_form(project: Project) -> ProjectForm:
    """The edit form unbound, as the project's stored values fill it."""
    return ProjectForm(initial=ProjectForm.initial_for(project))


def stored_fingerprint(project: Project) -> str:
    """The fingerprint of the stored values the edit form shows (``stale``)."""
    return fingerprint(stored_values([stored_form(project)]))


def stale_refusal(form: ProjectForm, project: Project) -> tuple[dict, int] | None:
    """An edit posted from a form whose stored values have changed since
    (or that does not say which it had): the refusal to show above the form
    and its status; None for a form that is current."""
    return refusal(form, stored_form(project), f"Project {project.slug}")


# The most characters of one value an edit's message shows.
SHOWN_CHARS = 80
# A project field shown by another form field's label.
FIELD_OF = {"repo_path": "repo"}


def saved_text(form: ProjectForm, slug: str, changes: dict) -> str:
    """What an edit changed, each field by its label, before → after (the
    changes ``project_edit`` prints), or that nothing did."""
    if not changes:
        return f"No changes to project {slug}: nothing was saved."
    said = []
    for name, (before, after) in changes.items():
        shown = FIELD_OF.get(name, name)
        label = str(form[shown].label) if shown in form.fields else pretty_name(name)
        label = label[:1].lower() + label[1:]
        said.append(f"{label} {_value(before)} → {_value(after)}")
    return f"Saved project {slug}: {'; '.join(said)}."


def _value(value) -> str:
    """A changed value as the form shows it, cut to ``SHOWN_CHARS``."""
    if value is None or value == "" or value == []:
        text = "none"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, list):
        text = shlex.join(map(str, value))
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"
