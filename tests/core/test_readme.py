"""The README's set-up section says what a newcomer needs to know."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_the_readme_names_port_and_host_and_they_are_what_dev_run_reads():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "`PORT`" in start and "`HOST`" in start
    dev = (ROOT / "dev").read_text()
    run = dev[dev.index("cmd_run() {") : dev.index("cmd_test() {")]
    assert re.search(r"host=\$\{HOST:-[^}]+\}", run)
    assert re.search(r"port=\$\{PORT:-[^}]+\}", run)


def test_the_readme_says_chromium_is_only_for_the_tests_and_run_skips_it():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "Chromium is needed only by `./dev test`" in start
    dev = (ROOT / "dev").read_text()
    run = dev[dev.index("cmd_run() {") : dev.index("cmd_test() {")]
    assert "chromium" not in run
