"""Hunk classes on the detail page and in the queue: badges, counts, hiding noise."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from replayhub.models import Comparison
from tests.factories import make_replay

HOSTILE = "<script>alert(1)</script>.txt"


def file_diff(path: str, old: str, new: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\n"
        "index 1111111..2222222 100644\n"
        f"--- a/{path}\n"
        f"+++ b/{path}\n"
        "@@ -1 +1 @@\n"
        f"-{old}\n"
        f"+{new}\n"
    )


DOD = (
    file_diff("src/app.py", "x = 1", "x = 2")
    + file_diff("notes.txt", "alpha", "alpha  ")
    + file_diff("src/util.py", "# old comment", "# new comment")
    + file_diff("requirements.txt", "django==5.2", "flask==3.0")
)
CLASSES = {
    "notes.txt": "whitespace",
    "requirements.txt": "reordered",
    "src/app.py": "substantive",
    "src/util.py": "python_equivalent",
}


def with_classes(replay, classes: dict[str, str], substantive: int | None = None):
    if substantive is None:
        substantive = sum(1 for c in classes.values() if c == "substantive")
    Comparison.objects.filter(replay=replay).update(
        hunk_classes=classes, substantive_files=substantive
    )
    return replay


def detail(client, replay, **params):
    return client.get(reverse("reviews:replay_detail", args=[replay.pk]), params)


def dod_section(response) -> str:
    html = response.content.decode()
    start = html.index('<section id="dod"')
    return html[start : html.index("</section>", start)]


@pytest.fixture
def as_reviewer(client, reviewer):
    client.force_login(reviewer)
    return client


def test_each_noise_file_carries_its_badge_and_substantive_ones_none(as_reviewer):
    replay = with_classes(make_replay(diff=DOD), CLASSES)

    section = dod_section(detail(as_reviewer, replay))

    assert "4 files differ: 1 substantive, 3 noise" in section
    assert 'data-hunk="whitespace"' in section
    assert '<span class="tag hunk" title="' in section
    assert ">whitespace only</span>" in section
    assert ">reordered lines</span>" in section
    assert ">same Python AST</span>" in section
    app = section[section.index('id="dod-0"') : section.index('id="dod-1"')]
    assert 'data-hunk="substantive"' in app
    assert "tag hunk" not in app


def test_hide_noise_is_a_plain_link_that_keeps_the_other_parameters(as_reviewer):
    replay = with_classes(make_replay(diff=DOD), CLASSES)

    section = dod_section(detail(as_reviewer, replay, tab="x&y"))

    assert '<a href="?tab=x%26y&amp;noise=hide#dod">Hide noise</a>' in section


def test_hiding_noise_leaves_the_substantive_files_and_the_count(as_reviewer):
    replay = with_classes(make_replay(diff=DOD), CLASSES)

    section = dod_section(detail(as_reviewer, replay, noise="hide"))

    assert '<code class="path">src/app.py</code>' in section
    for path in ["notes.txt", "src/util.py", "requirements.txt"]:
        assert f'<code class="path">{path}</code>' not in section
    # The file keeps its index in the whole diff, which loads it on demand.
    assert 'id="dod-0"' in section and 'id="dod-1"' not in section
    assert "4 files differ: 1 substantive, 3 noise" in section
    assert "3 hidden" in section
    assert '<a href="?#dod">Show noise</a>' in section


def test_when_every_file_is_noise_hiding_says_so(as_reviewer):
    replay = with_classes(
        make_replay(diff=file_diff("notes.txt", "a", "a ")), {"notes.txt": "whitespace"}
    )

    section = dod_section(detail(as_reviewer, replay, noise="hide"))

    assert "1 file differs: 0 substantive, 1 noise" in section
    assert "Every file shown here differs only in noise." in section
    assert "do not differ" not in section


def test_a_comparison_without_classes_shows_every_file_and_no_count(as_reviewer):
    replay = make_replay(diff=DOD)

    section = dod_section(detail(as_reviewer, replay, noise="hide"))

    assert "hunk-count" not in section
    assert "tag hunk" not in section
    assert section.count('<article class="file"') == 4


def test_hostile_paths_and_classes_are_escaped(as_reviewer):
    classes = {HOSTILE: "whitespace", 'x" onmouseover="alert(1)': "substantive"}
    diff = file_diff(HOSTILE, "a", "a ") + file_diff("src/app.py", "x", "y")
    replay = with_classes(make_replay(diff=diff), classes)

    html = detail(as_reviewer, replay).content.decode()

    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.txt" in html
    assert 'onmouseover="alert(1)' not in html
    assert ">whitespace only</span>" in dod_section(detail(as_reviewer, replay))


def test_an_unknown_stored_class_gets_no_badge(as_reviewer):
    replay = with_classes(
        make_replay(diff=file_diff("a.txt", "a", "b")),
        {"a.txt": '<b onclick="x()">'},
        substantive=1,
    )

    section = dod_section(detail(as_reviewer, replay))

    assert "data-hunk" not in section
    assert "onclick" not in section
    assert "1 file differs: 1 substantive, 0 noise" in section


# --- the queue ----------------------------------------------------------------------


def test_a_queue_row_shows_how_many_files_differ_in_substance(as_reviewer):
    classified = with_classes(make_replay(verdict="equivalent", diff=DOD), CLASSES)
    make_replay(verdict="divergent")  # stored before classes existed

    response = as_reviewer.get(reverse("reviews:queue"))

    rows = {row["id"]: row for row in response.context["rows"]}
    assert rows[classified.pk]["substantive"] == 1
    html = response.content.decode()
    assert html.count("1 substantive</span>") == 1
    assert html.count('class="substantive"') == 1


def test_the_queue_reads_the_stored_count_never_the_classes(as_reviewer):
    for _ in range(3):
        with_classes(make_replay(diff=DOD), CLASSES)

    with CaptureQueriesContext(connection) as captured:
        as_reviewer.get(reverse("reviews:queue"))

    sql = " ".join(q["sql"] for q in captured.captured_queries)
    assert "substantive_files" in sql
    assert "hunk_classes" not in sql
