"""Splitting git's unified diffs per file and numbering their lines."""

from __future__ import annotations

from reviews.replay_page.diffs import (
    ADD,
    CONTEXT,
    DEL,
    HUNK,
    NOTE,
    pair_by_path,
    split_files,
)

TWO_FILES = """\
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,4 +10,5 @@ def main():
 a = 1
-b = 2
+b = 3
+c = 4
 d = 5
@@ -40,2 +41,2 @@ def other():
-x
+y
 z
diff --git a/docs/new file.md b/docs/new file.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/docs/new file.md\t
@@ -0,0 +1,2 @@
+# Title
+text
\\ No newline at end of file
"""


def test_a_diff_is_split_at_each_git_header():
    files = split_files(TWO_FILES)
    assert [f.path for f in files] == ["src/app.py", "docs/new file.md"]
    assert [f.status for f in files] == ["modified", "added"]


def test_lines_carry_old_and_new_numbers_from_the_hunk_header():
    lines = split_files(TWO_FILES)[0].lines
    assert lines[0].kind == HUNK
    assert [(ln.kind, ln.old, ln.new, ln.text) for ln in lines[1:6]] == [
        (CONTEXT, 10, 10, "a = 1"),
        (DEL, 11, None, "b = 2"),
        (ADD, None, 11, "b = 3"),
        (ADD, None, 12, "c = 4"),
        (CONTEXT, 12, 13, "d = 5"),
    ]
    second_hunk = lines[6:]
    assert [(ln.kind, ln.old, ln.new) for ln in second_hunk] == [
        (HUNK, None, None),
        (DEL, 40, None),
        (ADD, None, 41),
        (CONTEXT, 41, 42),
    ]


def test_additions_and_deletions_are_counted_per_file():
    first, second = split_files(TWO_FILES)
    assert (first.additions, first.deletions) == (3, 2)
    assert (second.additions, second.deletions) == (2, 0)


def test_the_no_newline_marker_is_a_note_not_a_change():
    lines = split_files(TWO_FILES)[1].lines
    assert lines[-1].kind == NOTE
    assert lines[-1].text == "\\ No newline at end of file"


def test_header_lines_that_look_like_changes_are_not_counted():
    # "--- a/..." and "+++ b/..." belong to the header, not to the hunk.
    first = split_files(TWO_FILES)[0]
    assert "index 1111111..2222222 100644" in first.header
    assert all(line.text != "-- a/src/app.py" for line in first.lines)


def test_a_deleted_line_that_starts_with_dashes_stays_a_deletion():
    diff = (
        "diff --git a/x.md b/x.md\n--- a/x.md\n+++ b/x.md\n"
        "@@ -1,2 +1,1 @@\n--- a rule\n keep\n"
    )
    (only,) = split_files(diff)
    assert [(ln.kind, ln.text) for ln in only.lines[1:]] == [
        (DEL, "-- a rule"),
        (CONTEXT, "keep"),
    ]


def test_deleted_renamed_and_binary_files_are_recognised():
    diff = """\
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/a.py b/b.py
similarity index 100%
rename from a.py
rename to b.py
diff --git a/logo.png b/logo.png
index 1..2 100644
Binary files a/logo.png and b/logo.png differ
"""
    deleted, renamed, binary = split_files(diff)
    assert (deleted.path, deleted.status, deleted.deletions) == (
        "old.txt",
        "deleted",
        1,
    )
    assert (renamed.old_path, renamed.path, renamed.status) == (
        "a.py",
        "b.py",
        "renamed",
    )
    assert renamed.lines == []
    assert binary.binary and binary.path == "logo.png"


def test_quoted_paths_are_decoded():
    diff = (
        'diff --git "a/tab\\there.txt" "b/tab\\there.txt"\n'
        '--- "a/tab\\there.txt"\n+++ "b/tab\\there.txt"\n@@ -1 +1 @@\n-a\n+b\n'
    )
    (only,) = split_files(diff)
    assert only.path == "tab\there.txt"


def test_octal_escapes_in_quoted_paths_are_utf8():
    diff = 'diff --git "a/caf\\303\\251" "b/caf\\303\\251"\n'
    assert split_files(diff)[0].path == "café"


def test_a_path_with_spaces_and_no_hunks_still_gets_its_name():
    diff = "diff --git a/my dir/b c b/my dir/b c\nold mode 100644\nnew mode 100755\n"
    (only,) = split_files(diff)
    assert only.path == "my dir/b c"
    assert only.header == ["old mode 100644", "new mode 100755"]


def test_text_before_the_first_header_is_kept_as_its_own_entry():
    files = split_files("stray preamble\n" + TWO_FILES)
    assert len(files) == 3
    assert files[0].header == ["stray preamble"]


def test_a_plain_unified_diff_without_git_headers_is_split_at_its_minus_lines():
    diff = (
        "--- a/one\n+++ b/one\n@@ -1 +1 @@\n-1\n+2\n"
        "--- a/two\n+++ b/two\n@@ -1 +1 @@\n-3\n+4\n"
    )
    assert [f.path for f in split_files(diff)] == ["one", "two"]


def test_a_diff_cut_short_by_the_cap_parses_up_to_the_cut():
    cut = TWO_FILES[: TWO_FILES.index("+c = 4") + 3]
    files = split_files(cut)
    assert len(files) == 1
    assert files[0].lines[-1].kind == ADD
    assert files[0].lines[-1].text == "c "


def test_only_newlines_end_lines():
    diff = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\x0cb\n+a\rb\n"
    lines = split_files(diff)[0].lines
    assert [ln.text for ln in lines[1:]] == ["a\x0cb", "a\rb"]


def test_markup_in_a_diff_is_kept_verbatim_for_the_template_to_escape():
    diff = (
        "diff --git a/x.html b/x.html\n--- a/x.html\n+++ b/x.html\n"
        "@@ -0,0 +1 @@\n+<script>alert(1)</script>\n"
    )
    assert split_files(diff)[0].lines[-1].text == "<script>alert(1)</script>"


def test_an_empty_diff_has_no_files():
    assert split_files("") == []


def test_pairs_line_up_the_two_changes_by_path():
    left = split_files(TWO_FILES)
    right = split_files(
        "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/extra.py b/extra.py\n--- a/extra.py\n+++ b/extra.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert pair_by_path(left, right) == [
        ("src/app.py", 0, 0),
        ("docs/new file.md", 1, None),
        ("extra.py", None, 1),
    ]
