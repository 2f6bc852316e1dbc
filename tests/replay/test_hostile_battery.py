"""Hostile agents back to back: each replay ends with a verdict naming the
agent's doing, and nothing of any of them is left behind.

No row ``running``, no directory under the work dir, no process, no cgroup,
and none of them counted as ReplayHub's fault (``harness_error``,
``worker_lost``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from replayhub import services
from replayhub.models import Replay
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.cgroups import RawCgroupBackend
from tests.conftest import processes_mentioning
from tests.factories import make_calc_project, make_calc_run

pytestmark = pytest.mark.django_db

GOOD = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"

# mode -> what the agent does (after writing the original's fix, so a replay
# that gets past what it does reaches the test gate).
HOSTILE = {
    "nul": "printf 'agent says a\\000b\\n'",
    "usage": 'echo \'{"input_tokens": 9223372036854775807, "cost_usd": 1e15}\''
    ' > "$REPLAYHUB_USAGE_FILE"',
    # Past PATH_MAX, with a file at the bottom.
    "deep": "python3 -c 'import os\nfor _ in range(2100):\n"
    '    os.mkdir("d"); os.chdir("d")\nopen("f", "w").close()\'',
    "manyfiles": "mkdir many && cd many && python3 -c 'for i in range(1500): "
    'open(str(i), "w").close()\'',
    "disk": "i=0; while [ $i -lt 64 ]; do head -c 16777216 /dev/zero > f$i; "
    "i=$((i+1)); done",
    "dotgit": "mkdir .GIT && echo '[core]' > .GIT/config",
    "encoding": "echo 'calc.py working-tree-encoding=UTF-16' > .gitattributes",
    "nested": "git init -q vendor && echo x > vendor/x.txt",
    "nestedlink": "mkdir -p lib/.git/refs && ln -s /etc/shadow lib/.git/HEAD"
    " && echo y > lib/y.txt",
    "fifo": "mkfifo pipe",
    "locked": "mkdir -p locked/in && echo z > locked/in/z && chmod 0 locked/in/z"
    " && chmod 0 locked/in locked",
    "lockedroot": "chmod 0 .",
    # Fills the disk when its tests import it.
    "testfill": 'printf \'i = 0\\nwhile True:\\n    open(f"f{i}", "wb")'
    ".write(bytes(16 << 20)); i += 1\\n' > calc.py",
    "linger": "setsid python3 -c 'import time; time.sleep(300)' {marker} & sleep 0.2",
    "memory": "python3 -c 'x = bytearray(1024 * 1024 * 1024)'",
}


def test_hostile_agents_back_to_back_leave_nothing_and_fault_nothing(
    calc_repo, calc_base, calc_good
):
    marker = f"hostile-{uuid.uuid4().hex}"
    script = (
        'mode=$(head -n 1 "$REPLAYHUB_PROMPT_FILE")\n'
        f"{GOOD}\n"
        'case "$mode" in\n'
        + "".join(
            f"  {mode}) {action.replace('{marker}', marker)} ;;\n"
            for mode, action in HOSTILE.items()
        )
        + "esac\n"
    )
    project = make_calc_project(
        calc_repo,
        agent_command=["sh", "-c", script],
        allowed_paths=[],
        max_files=1000,
        max_disk_mb=64,
        memory_limit_mb=256,
    )
    results = {}
    for mode in HOSTILE:
        run = make_calc_run(project, prompt=mode, original=calc_good, base=calc_base)
        replay = services.replay_create(run=run, trigger="command")
        services.replay_execute(replay_id=replay.pk)
        results[mode] = Replay.objects.get(pk=replay.pk)

    codes = {mode: (r.verdict, r.reason_code) for mode, r in results.items()}
    assert not Replay.objects.filter(status="running").exists()
    faults = {m: r.reason for m, r in results.items() if r.reason_code in FAULTS}
    assert faults == {}
    assert codes["manyfiles"] == ("inconclusive", "cap_fired")
    assert codes["disk"] == ("inconclusive", "cap_fired")
    assert codes["dotgit"] == ("inconclusive", "unstorable_paths")
    assert codes["deep"] == ("inconclusive", "unstorable_paths")
    assert codes["fifo"] == ("inconclusive", "unstorable_paths")
    assert codes["memory"] == ("inconclusive", "cap_fired")
    assert codes["lockedroot"] == ("identical", "same_tree")
    # Its test run was stopped by the disk cap, so it did not run.
    assert codes["testfill"] == ("inconclusive", "tests_not_run")
    assert "\x00" not in results["nul"].agent_output

    work_dir = Path(settings.REPLAYHUB_WORK_DIR)
    assert [p.name for p in work_dir.iterdir() if p.name.startswith("replay-")] == []
    assert processes_mentioning(marker) == []
    assert leftover_cgroups() == []


FAULTS = {"harness_error", "worker_lost"}


def leftover_cgroups() -> list[str]:
    """Cgroups the sandbox made for this process's runs and left behind."""
    backend = BwrapRunner()._limit_backend()
    if not isinstance(backend, RawCgroupBackend):
        return []
    mine = f"{os.getpid()}-"
    return [
        str(child)
        for parent in backend.parent_dirs()
        if parent.is_dir()
        for child in parent.iterdir()
        if child.is_dir() and child.name.startswith(mine)
    ]


def test_agents_bending_caps_and_evidence_back_to_back_leave_nothing_and_fault_nothing(
    calc_repo, calc_base, calc_good, monkeypatch, settings
):
    """The ways an agent with model access can bend a cap or swamp its
    evidence, one replay each, through the gateway to a local stand-in."""
    from replayhub.demo.calculator import GOOD as FIXED
    from replayhub.demo.model_api import StandInProvider
    from replayhub.models import EgressAttempt, ModelCall, Provider

    settings.REPLAYHUB_EVIDENCE_KEPT = 40
    monkeypatch.setenv("REPLAYHUB_TEST_BATTERY_KEY", "sk-battery")
    prompt = f"model\n\n```python\n{FIXED}```\n"
    with StandInProvider(key="sk-battery") as provider:
        project = make_calc_project(calc_repo, max_tokens=500, cap_grace_seconds=1)
        project.providers.add(
            Provider.objects.create(
                name="acme",
                kind="anthropic",
                base_url=provider.base_url,
                key_env="REPLAYHUB_TEST_BATTERY_KEY",
                prices={"stand-in": {"input": "3", "output": "15"}},
            )
        )
        cases = {
            # Asks for more than the cap allows, then retries for a minute.
            "persist": (prompt.replace("model", "persist", 1), lambda: None),
            # Hundreds of refused CONNECTs.
            "flood": ("flood 300", lambda: None),
            # Every call fails upstream.
            "failing": (prompt, lambda: setattr(provider, "failures", [500] * 5)),
        }
        results = {}
        for name, (text, arrange) in cases.items():
            if name == "failing":
                project.max_tokens = None
                project.save()
            arrange()
            run = make_calc_run(
                project,
                prompt=text,
                original=calc_good,
                base=calc_base,
                external_id=name,
            )
            replay = services.replay_create(run=run, trigger="command")
            services.replay_execute(replay_id=replay.pk)
            results[name] = Replay.objects.get(pk=replay.pk)

    codes = {name: (r.verdict, r.reason_code) for name, r in results.items()}
    assert codes == {
        "persist": ("inconclusive", "cap_fired"),
        "flood": ("identical", "same_tree"),
        "failing": ("inconclusive", "provider_error"),
    }
    assert "ended 1 s after" in results["persist"].reason
    assert EgressAttempt.objects.filter(replay=results["flood"]).count() == 40
    assert results["flood"].evidence["egress_total"] == 300
    assert ModelCall.objects.filter(replay=results["persist"]).count() <= 40
    assert not Replay.objects.filter(status="running").exists()
    work_dir = Path(settings.REPLAYHUB_WORK_DIR)
    assert [p.name for p in work_dir.iterdir() if p.name.startswith("replay-")] == []
    assert leftover_cgroups() == []
