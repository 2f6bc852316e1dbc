"""The replay detail page: everything a reviewer needs to decide, all escaped."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from replayhub.models import Replay, TestOutcome
from reviews.replay_page import views
from tests.factories import make_replay

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def detail(client, replay):
    return client.get(reverse("reviews:replay_detail", args=[replay.pk]))


@pytest.fixture
def as_lead(client, lead):
    client.force_login(lead)
    return client


def test_the_verdict_reason_and_code_lead_the_page(as_lead):
    replay = make_replay(verdict="divergent")

    html = detail(as_lead, replay).content.decode()

    assert 'class="badge big v-divergent" id="automated-verdict"' in html
    assert "The replay&#x27;s tree fails the tests." in html
    assert '<code class="code-tag">replay_fails_tests</code>' in html
    assert "Replay fails tests" in html


def test_checks_show_their_evidence_classes(as_lead):
    html = detail(as_lead, make_replay()).content.decode()

    assert 'class="ev ev-cryptographically_verified">cryptographically verified' in html
    assert 'class="ev ev-independently_executed">independently executed' in html


def test_the_provenance_chain_is_spelled_out(as_lead):
    replay = make_replay()
    replay.provenance.update(
        base={
            "sha": "9" * 40,
            "source": "first-parent",
            "trusted": False,
            "confirmed": False,
            "reason": "the base is a guess",
        },
        image="python:3.12",
        image_pinned=False,
        project_config_sha256="e" * 64,
        warnings=["floating image tag: python:3.12"],
    )
    Replay.objects.filter(pk=replay.pk).update(provenance=replay.provenance)

    html = detail(as_lead, replay).content.decode()

    assert "<code>999999999999</code>" in html
    assert '<span class="tag">first-parent</span>' in html
    assert '<span class="tag bad">not trusted</span>' in html
    assert "the base is a guess" in html
    assert '<span class="tag bad">floating tag</span>' in html
    assert '<span class="tag bad">drifted</span>' in html
    assert "floating image tag: python:3.12" in html
    prompt_hash = hashlib.sha256(replay.run.prompt.encode()).hexdigest()
    assert prompt_hash[:16] in html
    assert "openai / <code>gpt-5</code> · effort high" in html


def test_diffs_have_line_numbers_and_colours_per_file(as_lead):
    html = detail(as_lead, make_replay()).content.decode()

    assert '<code class="path">src/app.py</code>' in html
    assert (
        '<tr class="l-del"><td class="ln" data-side="old" data-line="2">2</td>'
        '<td class="ln"></td>'
        '<td class="code"><span class="sign">-</span>x = 1</td></tr>'
    ) in html
    assert (
        '<tr class="l-add"><td class="ln"></td>'
        '<td class="ln" data-side="new" data-line="3">3</td>'
        '<td class="code"><span class="sign">+</span>y = 3</td></tr>'
    ) in html


def test_the_two_changes_sit_side_by_side_per_file(as_lead):
    replay = make_replay(
        replay_patch=(
            "diff --git a/other.py b/other.py\n--- a/other.py\n+++ b/other.py\n"
            "@@ -1 +1 @@\n-a\n+b\n"
        )
    )

    response = detail(as_lead, replay)

    pairs = response.context["pairs"]
    assert [(p["path"], bool(p["left"]), bool(p["right"])) for p in pairs] == [
        ("src/app.py", True, False),
        ("other.py", False, True),
    ]
    html = response.content.decode()
    assert "Not changed by the replay." in html
    assert "Not changed by the original." in html


def test_truncation_is_stated(as_lead):
    html = detail(as_lead, make_replay(truncated=True)).content.decode()
    assert 'id="truncated"' in html


def big_diff(files: int, lines: int) -> str:
    parts = []
    for n in range(files):
        body = "".join(f"+line {i}\n" for i in range(lines))
        parts.append(
            f"diff --git a/f{n}.txt b/f{n}.txt\n--- a/f{n}.txt\n+++ b/f{n}.txt\n"
            f"@@ -0,0 +1,{lines} @@\n{body}"
        )
    return "".join(parts)


def test_a_large_diff_lists_its_files_and_loads_each_on_demand(as_lead, monkeypatch):
    monkeypatch.setattr(views, "INLINE_DIFF_LINES", 50)
    replay = make_replay(diff=big_diff(3, 40))
    file_url = reverse("reviews:replay_diff_file", args=[replay.pk, "dod", 2])

    html = detail(as_lead, replay).content.decode()

    assert "line 39" not in html.split('id="changes"')[0]
    assert f'href="{file_url}" hx-get="{file_url}"' in html
    assert "Show 41 lines" in html

    with CaptureQueriesContext(connection) as captured:
        part = as_lead.get(file_url, headers={"HX-Request": "true"})
    assert part.status_code == 200
    body = part.content.decode()
    assert "<html" not in body
    assert "line 39" in body
    loaded = " ".join(q["sql"] for q in captured.captured_queries)
    assert "original_patch" not in loaded and "replay_patch" not in loaded


def test_a_diff_file_opens_as_a_page_of_its_own_without_javascript(as_lead):
    replay = make_replay()

    page = as_lead.get(
        reverse("reviews:replay_diff_file", args=[replay.pk, "replay", 0])
    )

    assert page.status_code == 200
    assert b"<html" in page.content
    assert b"Replay change: <code>src/app.py</code>" in page.content


@pytest.mark.parametrize(("kind", "index"), [("dod", 1), ("nope", 0), ("replay", 9)])
def test_an_unknown_diff_file_is_not_found(as_lead, kind, index):
    replay = make_replay()
    url = reverse("reviews:replay_diff_file", args=[replay.pk, kind, index])
    assert as_lead.get(url).status_code == 404


def test_an_unknown_replay_is_not_found(as_lead):
    assert as_lead.get(reverse("reviews:replay_detail", args=[999])).status_code == 404


def test_test_outcomes_show_each_tree_and_its_reruns(as_lead):
    replay = make_replay(verdict="inconclusive")
    TestOutcome.objects.create(
        replay=replay,
        tree="replay",
        attempt=2,
        ran=True,
        passed=False,
        exit_code=1,
        tests_executed=4,
        tests_failed=1,
        output_tail="1 failed, 3 passed",
    )

    response = detail(as_lead, replay)

    outcomes = response.context["outcomes"]
    assert [(tree, [o.attempt for o in runs]) for tree, runs in outcomes] == [
        ("Original", [1]),
        ("Replay", [1, 2]),
    ]
    html = response.content.decode()
    assert "rerun 1" in html
    assert '<span class="outcome o-fail">failed</span>' in html
    assert "1 failed, 3 passed" in html
    # Each tree is one header over its runs; no row has an empty header.
    table = html[html.index('<table class="grid compact tests">') :]
    table = table[: table.index("</table>")]
    assert '<th scope="rowgroup" rowspan="2">Replay</th>' in table
    assert not re.search(r"<th[^>]*>\s*</th>", table)


def test_the_agent_output_tail_is_shown(as_lead):
    replay = make_replay(agent_output="x" * 10 + "THE END")
    html = detail(as_lead, replay).content.decode()
    assert (
        '<pre class="log" tabindex="0" role="region" aria-label="Agent output">'
        "xxxxxxxxxxTHE END</pre>"
    ) in html


def test_other_replays_of_the_run_are_linked(as_lead):
    first = make_replay(verdict="inconclusive")
    second = make_replay(verdict="divergent", run=first.run)

    html = detail(as_lead, second).content.decode()

    assert f'href="{reverse("reviews:replay_detail", args=[first.pk])}"' in html
    assert "attempt 1" in html


def test_a_running_replay_shows_its_phase_and_no_decision(client, reviewer):
    done = make_replay()
    running = Replay.objects.create(
        run=done.run, project=done.project, status="running", phase="tests_replay"
    )
    client.force_login(reviewer)

    html = detail(client, running).content.decode()

    assert "phase <b>Tests on replay</b>" in html
    assert 'name="decision"' not in html


def test_agent_and_record_content_is_escaped_everywhere(as_lead):
    diff = (
        "diff --git a/x.html b/x.html\n--- a/x.html\n+++ b/x.html\n"
        f"@@ -0,0 +1 @@\n+{PAYLOAD}\n"
    )
    replay = make_replay(
        title=PAYLOAD,
        prompt=PAYLOAD,
        diff=diff,
        original_patch=diff,
        replay_patch=diff,
        test_output=PAYLOAD,
        agent_output=PAYLOAD,
    )

    html = detail(as_lead, replay).content.decode()
    queue_html = as_lead.get(reverse("reviews:queue")).content.decode()

    for page in (html, queue_html):
        assert "<script>window.__pwned" not in page
        # Only inside escaped text: the quote after it escaped (either entity).
        inert = page.replace("onerror=&quot;", "").replace("onerror=&#34;", "")
        assert "onerror=" not in inert
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert html.count("&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;") >= 6


def test_the_environment_shows_its_key_whether_cached_and_its_setup_time(as_lead):
    replay = make_replay()
    replay.evidence["environment"] = {
        "key": "c0ffee" * 10 + "abcd",
        "cached": True,
        "setup_seconds": 12.345,
    }
    replay.save()

    html = detail(as_lead, replay).content.decode()

    assert '<code title="' + "c0ffee" * 10 + 'abcd">c0ffeec0ffeec0ff</code>' in html
    assert "from the cache" in html and "setup took 12.3 s" in html


def test_the_environment_names_the_files_its_key_was_made_of(as_lead):
    replay = make_replay()
    replay.evidence["environment"] = {
        "key": "c0ffee" * 10 + "abcd",
        "cached": False,
        "setup_seconds": 3.0,
        "inputs": ["requirements.txt", f"setup{PAYLOAD}.sh"],
        "inputs_count": 2,
        "repository": ["ab" * 20],
        "scope": "group:ml-team",
    }
    replay.save()

    html = detail(as_lead, replay).content.decode()

    assert "Keyed by 2 files, the repository and the group ml-team" in html
    assert (
        "<code>requirements.txt</code>" in html and "<code>abababababab</code>" in html
    )
    assert PAYLOAD not in html


def test_a_failed_setup_shows_its_output_escaped(as_lead):
    replay = make_replay(
        verdict="inconclusive", reason_code="setup_failed", reason="setup failed."
    )
    replay.evidence["environment"] = {
        "key": "e" * 64,
        "cached": False,
        "setup_seconds": 1.0,
        "failed": True,
        "output_tail": PAYLOAD,
    }
    replay.save()

    html = detail(as_lead, replay).content.decode()

    assert "setup failed</span>" in html and "built for this replay" in html
    assert "Project setup failed" in html
    assert PAYLOAD not in html and "&lt;script&gt;window.__pwned=1" in html
