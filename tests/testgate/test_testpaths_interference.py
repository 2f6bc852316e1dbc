"""Changed code that could decide a test run (``paths.find_interference``): a
process exit at import, a mention of the JUnit report's path, a runner's
summary in a string; the bounds of the search and its sentence in the verdict."""

from __future__ import annotations

import time

import pytest

from replayhub.testgate.paths import (
    JUNIT_PATH,
    MAX_HITS,
    MAX_SCAN_CHARS,
    PROCESS_EXIT_AT_IMPORT,
    RUNNER_SUMMARY,
    TOO_LARGE,
    UNPARSEABLE_PYTHON,
    Interference,
    find_interference,
    interference_summary,
)

EXIT = PROCESS_EXIT_AT_IMPORT


def kinds(text, path="src/app.py", **kwargs):
    """The (line, kind) of each hit in one changed file."""
    return [(h.line, h.kind) for h in find_interference({path: text}, **kwargs)]


def exits(text, path="src/app.py"):
    return [line for line, kind in kinds(text, path) if kind == EXIT]


# --- process exits at import: Python --------------------------------------------


def marked(source):
    """The lines of ``source`` that end with the marker ``# <-``."""
    return [n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# <-")]


EXITS_AT_IMPORT = {
    "os._exit": "import os\nos._exit(0)  # <-\n",
    "sys.exit": "import sys\nsys.exit()  # <-\n",
    "sys.exit zero": "import sys\nsys.exit(0)  # <-\n",
    "sys.exit of a call": "import sys\nsys.exit(main())  # <-\n",
    "exit": "import os\nexit()  # <-\n",
    "quit": "import os\nquit(0)  # <-\n",
    "raise SystemExit": "import os\nraise SystemExit  # <-\n",
    "raise SystemExit(0)": "import os\nraise SystemExit(0)  # <-\n",
    "in an if": "import sys\nif True:\n    sys.exit(0)  # <-\n",
    "in an else": "import sys\nif False:\n    pass\nelse:\n    sys.exit(0)  # <-\n",
    "in a try": (
        "import sys\ntry:\n    sys.exit(0)  # <-\nexcept Exception:\n    pass\n"
    ),
    "in an except": (
        "import sys\ntry:\n    pass\nexcept Exception:\n    sys.exit()  # <-\n"
    ),
    "in a finally": "import sys\ntry:\n    pass\nfinally:\n    sys.exit()  # <-\n",
    "in a with": "import sys\nwith open('x'):\n    sys.exit(0)  # <-\n",
    "in a for": "import sys\nfor _ in [1]:\n    sys.exit(0)  # <-\n",
    "in a while": "import sys\nwhile True:\n    sys.exit(0)  # <-\n",
    "in a class body": "import sys\nclass Plugin:\n    sys.exit(0)  # <-\n",
    "in a default value": "import sys\ndef f(x=sys.exit(0)):  # <-\n    pass\n",
    "in a decorator": "import sys\n@sys.exit  # <-\ndef f():\n    pass\n",
    "outside a not-main guard": (
        "import sys\nif __name__ != '__main__':\n    sys.exit(0)  # <-\n"
    ),
    "in the else of a main guard": (
        "import sys\nif __name__ == '__main__':\n    pass\n"
        "else:\n    sys.exit(0)  # <-\n"
    ),
    "a kill of this process": "import os, signal\nos.kill(os.getpid(), 9)  # <-\n",
    "a kill of the process group": "import os\nos.kill(0, 15)  # <-\n",
}


@pytest.mark.parametrize("source", EXITS_AT_IMPORT.values(), ids=EXITS_AT_IMPORT)
def test_an_exit_that_runs_at_import_is_found(source):
    assert exits(source) == marked(source)


ALIASES = {
    "from os import _exit": "from os import _exit\n_exit(0)  # <-\n",
    "from os import _exit as": "from os import _exit as done\ndone(0)  # <-\n",
    "import sys as": "import sys as s\ns.exit()  # <-\n",
    "import os as": "import os as o\no._exit(0)  # <-\n",
    "from sys import exit as": "from sys import exit as leave\nleave()  # <-\n",
    "from os import *": "from os import *\n_exit(0)  # <-\n",
    "an assigned alias": "import sys\nbye = sys.exit\nbye()  # <-\n",
    "an alias of an alias": "import sys\na = sys.exit\nb = a\nb()  # <-\n",
    "a module alias": "import sys\nm = sys\nm.exit()  # <-\n",
    "getattr": "import sys\ngetattr(sys, 'exit')(0)  # <-\n",
    "__import__": "import io\n__import__('os')._exit(0)  # <-\n",
    "import_module": (
        "import importlib\nimportlib.import_module('os')._exit(0)  # <-\n"
    ),
    "builtins": "import builtins\nbuiltins.exit()  # <-\n",
    "from os import getpid, kill": (
        "from os import getpid, kill\nkill(getpid(), 9)  # <-\n"
    ),
    "an aliased SystemExit": "import os\nDone = SystemExit\nraise Done  # <-\n",
}


@pytest.mark.parametrize("source", ALIASES.values(), ids=ALIASES)
def test_an_exit_under_a_static_alias_is_found(source):
    assert exits(source) == marked(source)


CALLED_AT_IMPORT = {
    "a function called at import": (
        "import sys\ndef main():\n    sys.exit(0)\nmain()\n",
        [4],
    ),
    "through another function": (
        "import sys\ndef a():\n    b()\ndef b():\n    sys.exit()\na()\n",
        [6],
    ),
    "an async function": ("import os\nasync def f():\n    os._exit(0)\nf()\n", [4]),
    "an atexit handler": ("import atexit, os\natexit.register(os._exit, 0)\n", [2]),
    "an atexit lambda": (
        "import atexit, os\natexit.register(lambda: os._exit(0))\n",
        [2],
    ),
    "an atexit function": (
        "import atexit, os\ndef done():\n    os._exit(0)\natexit.register(done)\n",
        [4],
    ),
    "an atexit decorator": (
        "import atexit, os\n@atexit.register\ndef done():\n    os._exit(0)\n",
        [2],
    ),
    "a decorator that exits": (
        "import sys\ndef stop(f):\n    sys.exit(0)\n@stop\ndef g():\n    pass\n",
        [4],
    ),
}


@pytest.mark.parametrize(
    ("source", "lines"), CALLED_AT_IMPORT.values(), ids=CALLED_AT_IMPORT
)
def test_an_exit_reached_from_import_time_is_found(source, lines):
    assert exits(source) == lines


NOT_AT_IMPORT = {
    "in a function": "import sys\ndef main():\n    sys.exit(0)\n",
    "in an async function": "import os\nasync def main():\n    os._exit(0)\n",
    "in a method": (
        "import sys\nclass Cli:\n    def run(self):\n        sys.exit(0)\n"
    ),
    "in a lambda": "import sys\nstop = lambda: sys.exit(0)\n",
    "in a main guard": "import sys\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "in a reversed main guard": (
        'import sys\nif "__main__" == __name__:\n    raise SystemExit(main())\n'
    ),
    "in a comment": "import sys\n# sys.exit(0) used to live here\nx = 1\n",
    "in a docstring": '"""Call sys.exit(0) or os._exit(0) to stop."""\nimport sys\n',
    "in a string": "import os\nHELP = 'os._exit(0) ends it'\n",
    "a constant failure status": "import sys\nsys.exit(1)\n",
    "an error message": (
        "import sys\nif sys.version_info < (3, 11):\n    sys.exit('3.11+')\n"
    ),
    "SystemExit with a message": "import os\nraise SystemExit('unsupported')\n",
    "a shadowed exit": "def exit():\n    return 1\nexit()\n",
    "a harmless function called at import": (
        "import sys\ndef setup():\n    return 1\nsetup()\n"
    ),
    "a kill of another process": "import os\nos.kill(pid, 15)\n",
    "an unrelated exit attribute": "import contextlib\nstack.exit()\n",
    "a method named exit": (
        "class Cli:\n    def exit(self):\n        pass\nCli().exit()\n"
    ),
    "a function only referenced": (
        "import sys\ndef main():\n    sys.exit(0)\nHANDLERS = {'main': main}\n"
    ),
}


@pytest.mark.parametrize("source", NOT_AT_IMPORT.values(), ids=NOT_AT_IMPORT)
def test_an_exit_that_does_not_run_at_import_is_not_flagged(source):
    assert kinds(source) == []


def test_a_method_named_exit_does_not_hide_the_builtin():
    source = "class Cli:\n    def exit(self):\n        pass\nexit(0)\n"

    assert exits(source) == [4]


def test_the_hit_names_path_line_and_source():
    source = "import os\n\nif True:\n    os._exit(0)  # report success\n"

    assert find_interference({"src/boot.py": source}) == [
        Interference("src/boot.py", 4, EXIT, "os._exit(0)  # report success")
    ]


def test_a_python_script_without_a_suffix_is_parsed():
    source = "#!/usr/bin/env python3\nimport sys\nsys.exit(0)\n"

    assert exits(source, path="bin/run-checks") == [3]
    assert exits(source, path="bin/notes.txt") == []


def test_unparseable_python_with_an_exit_is_reported():
    source = "import sys\ndef broken(:\n    pass\nsys.exit(0)\n"

    assert kinds(source) == [(4, UNPARSEABLE_PYTHON)]


def test_unparseable_python_without_an_exit_is_ignored():
    assert kinds("def broken(:\n    pass\n") == []
    assert kinds("x = 1\x00\n") == []


def test_a_tree_too_deep_to_parse_is_treated_as_unparseable():
    source = "import sys\nx = " + "+".join(["1"] * 40_000) + "\nsys.exit(0)\n"

    assert kinds(source) in ([(3, UNPARSEABLE_PYTHON)], [(3, EXIT)])


# --- process exits: JavaScript and Go -------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "process.exit(0);\n",
        "function done() {\n  process.exit(0);\n}\n",
        "process.reallyExit(0);\n",
        'process["exit"](0);\n',
        "process . exit (0);\n",
    ],
)
def test_any_process_exit_in_javascript_is_found(source):
    assert kinds(source, path="packages/ui/src/setup.ts") == [
        (source.count("\n", 0, source.index("process")) + 1, EXIT)
    ]


def test_javascript_without_an_exit_and_shell_scripts_are_not_flagged():
    assert kinds("const exit = () => 0;\nexit();\n", path="src/app.js") == []
    assert kinds("#!/bin/sh\nexit 0\n", path="scripts/check.sh") == []
    assert kinds("process.exit(0)\n", path="docs/notes.md") == []


GO_INIT_EXIT = """\
package calc

import (
\t"os"
\txos "os"
)

func init() {
\tif os.Getenv("CI") != "" {
\t\tos.Exit(0)
\t}
\txos.Exit(0)
}

func main() {
\tos.Exit(run())
}
"""


def test_an_exit_in_a_go_init_is_found_and_one_in_main_is_not():
    assert kinds(GO_INIT_EXIT, path="pkg/calc/calc.go") == [(10, EXIT), (12, EXIT)]


def test_braces_in_go_strings_and_comments_do_not_end_the_init():
    source = (
        "package calc\n\nfunc init() {\n"
        "\ta := \"}\"\n\tb := '}'\n\tc := `\n}\n`\n"
        '\t// }\n\t/* } */\n\td := "\\"}"\n'
        "\tsyscall.Exit(0)\n}\n"
    )

    assert kinds(source, path="pkg/calc/init.go") == [(12, EXIT)]


def test_a_one_line_go_init_and_a_later_function():
    source = "package a\nfunc init() { os.Exit(0) }\nfunc other() { os.Exit(1) }\n"

    assert kinds(source, path="a/a.go") == [(2, EXIT)]


# --- the JUnit report path ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("src/report.py", "import os\npath = os.environ['REPLAYHUB_JUNIT_XML']\n"),
        ("src/report.py", "import os\n# REPLAYHUB_JUNIT_XML is where it goes\n"),
        ("src/report.py", "import os\nOUT = '/replayhub-out/junit.xml'\n"),
        ("scripts/ci.sh", 'set -e\ncp fake.xml "$REPLAYHUB_JUNIT_XML"\n'),
        ("src/report.js", "x = 1;\nwrite('reports/JUnit-results.xml');\n"),
    ],
)
def test_a_mention_of_the_junit_report_is_found(path, source):
    assert kinds(source, path=path) == [(2, JUNIT_PATH)]


def test_the_junit_variable_name_is_a_parameter():
    source = "import os\nos.environ['CUSTOM_JUNIT']\n"

    assert kinds(source, junit_variable="CUSTOM_JUNIT") == [(2, JUNIT_PATH)]
    assert kinds(source) == []
    assert kinds(source, junit_variable="") == []


def test_junit_in_prose_is_not_a_path():
    assert kinds("Reports use the JUnit XML format.\n", path="docs/ci.md") == []


# --- runner summaries -----------------------------------------------------------

SUMMARIES = {
    "pytest bar": "==================== 3 passed in 0.12s ====================",
    "pytest with warnings": "5 passed, 1 warning in 1.20s",
    "unittest": "Ran 12 tests in 0.004s",
    "unittest singular": "Ran 1 test in 0.001s",
    "go package": "ok  \tgithub.com/shop/calc\t0.012s",
    "go cached": "ok  \tgithub.com/shop/calc\t(cached)",
    "go verbose": "--- PASS: TestAdd (0.00s)",
    "cargo": "test result: ok. 3 passed; 0 failed; 0 ignored",
    "jest": "Tests:       3 passed, 3 total",
    "vitest": " Test Files  2 passed (2)",
    "mocha": "  3 passing (12ms)",
}


@pytest.mark.parametrize("summary", SUMMARIES.values(), ids=SUMMARIES)
def test_a_runner_summary_in_a_python_string_is_found(summary):
    source = f"import sys\nprint({summary!r})\n"

    assert kinds(source) == [(2, RUNNER_SUMMARY)]


@pytest.mark.parametrize("summary", SUMMARIES.values(), ids=SUMMARIES)
def test_a_runner_summary_in_other_files_is_found(summary):
    assert kinds(f"set -e\necho '{summary}'\n", path="scripts/ci.sh") == [
        (2, RUNNER_SUMMARY)
    ]


@pytest.mark.parametrize(
    "literal",
    [
        'f"{count} passed in {elapsed:.2f}s"',
        '"Ran %d tests in %.3fs" % (n, t)',
        '"{} passed in {}s".format(n, t)',
        'b"=== 3 passed in 0.1s ==="',
        '"Ran 3 tests in 0.001s\\n\\nOK"',
        '"-----\\nOK (skipped=1)"',
    ],
)
def test_summaries_built_from_placeholders_and_bytes_are_found(literal):
    assert kinds(f"import sys\nsys.stdout.write({literal})\n") == [(2, RUNNER_SUMMARY)]


def test_a_summary_inside_a_multiline_literal_names_its_own_line():
    source = (
        'import sys\nOUT = """\ncollected 3 items\n\n=== 3 passed in 0.1s ===\n"""\n'
    )

    assert kinds(source) == [(5, RUNNER_SUMMARY)]


@pytest.mark.parametrize(
    "literal",
    [
        '"All 3 passed the exam"',
        '"3 passed"',
        '"12 passed in 2019"',
        '"OK"',
        '"OK\\n"',
        'r"(\\d+) passed"',
        '"tests passed in CI"',
        '"ok, done"',
    ],
)
def test_ordinary_strings_are_not_summaries(literal):
    assert kinds(f"import sys\nx = {literal}\n") == []


def test_a_summary_in_a_python_comment_is_not_a_string():
    assert kinds("import sys\n# prints === 3 passed in 0.1s ===\n") == []


def test_prose_in_other_files_is_not_a_summary():
    prose = "Of the 3 candidates, 2 passed the review.\nOK\n"

    assert kinds(prose, path="docs/notes.md") == []


# --- bounds -----------------------------------------------------------------------

HOSTILE = {
    "equals signs": ("notes.txt", "=" * 10_000_000),
    "digits": ("data.csv", "1" * 10_000_000),
    "placeholders": ("notes.txt", "{" * 10_000_000),
    "summaries on one line": ("notes.txt", "--- PASS: 3 passed " * 600_000),
    "go inits never closed": ("pkg/a.go", "func init() {\n/*\n" * 700_000),
    "js exits": ("src/a.js", "process" + " " * 10_000_000),
    "python": ("src/a.py", "x = 1\n" * 1_700_000),
    "unparseable python": ("src/b.py", "(" * 10_000_000),
}


@pytest.mark.parametrize(("path", "text"), HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_10_mb_file_is_examined_quickly(path, text):
    started = time.monotonic()

    hits = find_interference({path: text})

    assert time.monotonic() - started < 10
    assert len(hits) <= MAX_HITS


def test_an_exit_hidden_past_the_cap_is_reported_as_too_large():
    source = "x = 1\n" * (MAX_SCAN_CHARS // 6 + 1) + "import os\nos._exit(0)\n"

    hits = find_interference({"src/padded.py": source})

    assert [h.kind for h in hits] == [TOO_LARGE]


def test_a_large_python_module_is_searched_for_the_words_of_an_exit():
    padding = "x = 1\n" * 60_000
    source = padding + "import os\nos._exit(0)\n"

    assert kinds(source) == [(60_002, TOO_LARGE)]
    assert kinds(padding) == []


def test_a_large_data_file_is_scanned_up_to_the_cap_without_a_warning():
    assert kinds("{}\n" * (MAX_SCAN_CHARS // 2), path="package-lock.json") == []


def test_hits_are_capped_and_ordered():
    files = {
        f"src/m{n:02}.py": "import sys\nsys.exit(0)\nprint('Ran 3 tests')\n"
        for n in range(40)
    }

    hits = find_interference(files)

    assert len(hits) == MAX_HITS
    assert hits[:3] == [
        Interference("src/m00.py", 2, EXIT, "sys.exit(0)"),
        Interference("src/m00.py", 3, RUNNER_SUMMARY, "print('Ran 3 tests')"),
        Interference("src/m01.py", 2, EXIT, "sys.exit(0)"),
    ]


def test_one_hit_per_line_and_kind():
    source = "import sys\nsys.exit(0); sys.exit(); exit()\n"

    assert kinds(source) == [(2, EXIT)]


def test_an_excerpt_is_at_most_200_characters():
    source = "import os\nx = [" + "1, " * 500 + "os._exit(0)]\n"

    (hit,) = find_interference({"src/a.py": source})

    assert len(hit.excerpt) <= 200


def test_no_files_no_hits():
    assert find_interference({}) == []


# --- the verdict sentence ------------------------------------------------------


def test_the_summary_of_no_hits():
    assert interference_summary([]) == (
        "No non-test file the replay changed could report the test run's result."
    )


def test_the_summary_names_files_and_lines():
    hits = [
        Interference("src/boot.py", 4, EXIT, "os._exit(0)"),
        Interference("src/report.py", 9, JUNIT_PATH, "junit.xml"),
    ]

    assert interference_summary(hits) == (
        "Non-test code the replay changed could report the test run's result itself: "
        "src/boot.py line 4 exits the process when loaded and "
        "src/report.py line 9 names the JUnit report path."
    )


def test_the_summary_names_at_most_five_hits():
    hits = [Interference(f"src/m{n}.py", 1, RUNNER_SUMMARY, "") for n in range(8)]

    summary = interference_summary(hits)

    assert summary.count("imitates a test runner's summary") == 5
    assert summary.endswith(
        "src/m4.py line 1 imitates a test runner's summary and 3 more."
    )
