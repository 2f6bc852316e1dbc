from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replayhub.environments.images import image_digest
from replayhub.models import Project, RolloutAnchor, RolloutMode
from replayhub.models.projects import rollout_settings_problem
from replayhub.project_setup import ProjectInvalid, project_fields
from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified


class Command(BaseCommand):
    help = (
        "Register a project. Commands are split like a shell would split them and "
        "stored as argument lists; they are never run through a shell."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument(
            "--repo",
            required=True,
            help="The git repository: a path on this host, or an https://, "
            "http://, ssh://, git://, file:// or git@host:path URL that each host "
            "mirrors.",
        )
        parser.add_argument(
            "--repo-credential-env",
            default="",
            metavar="VAR",
            help="Name of the environment variable that holds the credential (a "
            "token or password) for an https:// URL on each host. Only the name "
            "is stored.",
        )
        parser.add_argument(
            "--test-command", help="Required unless --harness-command is given."
        )
        parser.add_argument(
            "--agent-command", help="Required unless --harness-command is given."
        )
        parser.add_argument(
            "--allowed-paths", nargs="+", action="extend", default=[], metavar="GLOB"
        )
        parser.add_argument(
            "--test-paths",
            nargs="+",
            action="extend",
            metavar="GLOB",
            help="The test files and the test runner's configuration (default: "
            "the common layouts, conftest.py, pytest.ini, package.json, ...). "
            "When a replay's differ from the original's, the original's are run "
            "on the replay's code, and that run decides.",
        )
        parser.add_argument(
            "--providers",
            nargs="+",
            action="extend",
            default=[],
            metavar="NAME",
            help="Model providers (provider_add) the agent may call.",
        )
        parser.add_argument(
            "--egress-agent",
            nargs="+",
            action="extend",
            default=[],
            metavar="HOST:PORT",
            help="Hosts the agent may reach through the egress proxy "
            "(e.g. pypi.org:443, *.pythonhosted.org:443). Default: none.",
        )
        parser.add_argument(
            "--egress-tests",
            nargs="+",
            action="extend",
            default=[],
            metavar="HOST:PORT",
            help="Hosts the test runs may reach. Default: none.",
        )
        parser.add_argument(
            "--setup-command",
            default="",
            metavar="CMD",
            help="Run once per environment (per lockfile contents) on a clean "
            "checkout of the base; what it leaves in $REPLAYHUB_ENV_DIR is "
            "mounted read-only into the agent and test phases, its bin/ first "
            "on PATH. Default: no setup phase.",
        )
        parser.add_argument(
            "--setup-inputs",
            nargs="+",
            action="extend",
            metavar="GLOB",
            help="The files whose contents decide the environment (default: the "
            "common lockfiles: requirements*.txt, poetry.lock, package-lock.json, "
            "go.sum, ...).",
        )
        parser.add_argument(
            "--egress-setup",
            nargs="+",
            action="extend",
            default=[],
            metavar="HOST:PORT",
            help="Hosts the setup phase may reach (a package index). Default: none.",
        )
        parser.add_argument(
            "--root-image",
            default="",
            metavar="REF",
            help="An image pinned by digest (name@sha256:...) whose root file "
            "system the sandbox runs on, once imported with image_import.",
        )
        parser.add_argument(
            "--require-image-match",
            action="store_true",
            help="A record whose image digest differs from --root-image is "
            "inconclusive (image_mismatch), not only warned about.",
        )
        parser.add_argument(
            "--allow-test-interference",
            action="store_true",
            help="Let a replay whose change could report a test run's success "
            "itself still be equivalent.",
        )
        parser.add_argument("--time-limit", type=int, default=600, metavar="SECONDS")
        parser.add_argument("--default-branch", default="")
        rollouts = parser.add_argument_group(
            "rollouts",
            "For verifiers rollout records: how seeds are derived and judged.",
        )
        rollouts.add_argument(
            "--harness-command",
            metavar="CMD",
            help="Runs a seed in the sandbox: reads the messages in "
            "$REPLAYHUB_SEED_FILE, writes {completion, reward} to "
            "$REPLAYHUB_RESULT_FILE.",
        )
        rollouts.add_argument(
            "--verifier-command",
            metavar="CMD",
            help="Scores a replay's completion in a second, fresh sandbox with "
            "no network: reads $REPLAYHUB_SEED_FILE and "
            "$REPLAYHUB_COMPLETION_FILE, writes {reward} to "
            "$REPLAYHUB_RESULT_FILE. Without it the harness's own reward is "
            "used, and it can never make a replay equivalent.",
        )
        rollouts.add_argument(
            "--rollout-mode",
            choices=RolloutMode.values,
            default=RolloutMode.CONTINUE,
            metavar="MODE",
            help="continue (resume at an anchor) or recheck (verify the final "
            "attempt). Default: continue.",
        )
        rollouts.add_argument(
            "--anchor",
            choices=RolloutAnchor.values,
            default=RolloutAnchor.COMPACTION,
            metavar="A",
            help="Where continue seeds re-enter: compaction or tool-call. "
            "Default: compaction.",
        )
        rollouts.add_argument(
            "--max-anchors",
            metavar="N",
            default="1",
            help="Tool-call anchors drawn per rollout, or 'all'. Default: 1.",
        )
        rollouts.add_argument("--min-source-reward", type=float, metavar="X")
        rollouts.add_argument("--max-source-reward", type=float, metavar="Y")
        rollouts.add_argument(
            "--pass-threshold",
            type=float,
            default=1.0,
            metavar="T",
            help="A reward at or above this passes. Default: 1.0.",
        )
        rollouts.add_argument("--verification-turn", metavar="TEXT")
        rollouts.add_argument("--max-seed-tokens", type=int, metavar="N")
        rollouts.add_argument(
            "--rollout-seed",
            type=int,
            default=0,
            metavar="N",
            help="Salt of the deterministic draw of tool-call anchors.",
        )

    def handle(
        self,
        *args,
        slug,
        repo,
        repo_credential_env,
        test_command,
        agent_command,
        allowed_paths,
        time_limit,
        default_branch,
        test_paths,
        allow_test_interference,
        providers,
        egress_agent,
        egress_tests,
        setup_command,
        setup_inputs,
        egress_setup,
        root_image,
        require_image_match,
        **options,
    ):
        rollout = _rollout_settings(options)
        try:
            fields = project_fields(
                slug=slug,
                repo=repo,
                repo_credential_env=repo_credential_env,
                test_command=test_command,
                agent_command=agent_command,
                allowed_paths=allowed_paths,
                test_paths=test_paths,
                time_limit=time_limit,
                egress_agent=egress_agent,
                egress_tests=egress_tests,
                providers=providers,
                setup_command=setup_command or None,
                setup_inputs=setup_inputs,
                egress_setup=egress_setup,
                harness_command=options["harness_command"],
                verifier_command=options["verifier_command"] or None,
            )
        except ProjectInvalid as exc:
            raise CommandError(exc.message, returncode=2) from None
        named = fields.pop("providers")
        if (root_image or require_image_match) and not image_digest(root_image):
            raise CommandError(
                f"--root-image: {root_image!r} is not pinned by digest "
                "(name@sha256:<64 hex digits>).",
                returncode=2,
            )
        project = Project.objects.create(
            slug=slug,
            name=slug,
            default_branch=default_branch,
            allow_test_interference=allow_test_interference,
            **fields,
            **rollout,
            root_image=root_image,
            require_image_match=require_image_match,
        )
        project.providers.set(named)
        self.stdout.write(f"registered project {project.slug} ({project.repo_path})")
        if rewards_unverified(project):
            self.stderr.write(
                f"warning: {project.slug} {UNVERIFIED_WARNING} Give "
                "--verifier-command to score them in a sandbox of their own."
            )


def _rollout_settings(options: dict) -> dict:
    """The project's rollout fields from the command's options."""
    raw = str(options["max_anchors"]).strip().lower()
    if raw in ("all", "none", ""):
        max_anchors = None
    else:
        try:
            max_anchors = int(raw)
        except ValueError:
            max_anchors = 0
        if max_anchors < 1:
            raise CommandError(
                "--max-anchors takes a positive number, or 'all'.", returncode=2
            )
    if options["max_seed_tokens"] is not None and options["max_seed_tokens"] < 1:
        raise CommandError("--max-seed-tokens must be positive.", returncode=2)
    if problem := rollout_settings_problem(
        min_source_reward=options["min_source_reward"],
        max_source_reward=options["max_source_reward"],
        max_anchors=max_anchors,
    ):
        raise CommandError(problem, returncode=2)
    settings = {
        "rollout_mode": options["rollout_mode"],
        "rollout_anchor": options["anchor"],
        "max_anchors": max_anchors,
        "min_source_reward": options["min_source_reward"],
        "max_source_reward": options["max_source_reward"],
        "pass_threshold": options["pass_threshold"],
        "rollout_seed": options["rollout_seed"],
        "max_seed_tokens": options["max_seed_tokens"],
    }
    if options["verification_turn"] is not None:
        if not options["verification_turn"].strip():
            raise CommandError("--verification-turn is empty.", returncode=2)
        settings["verification_turn"] = options["verification_turn"]
    return settings
