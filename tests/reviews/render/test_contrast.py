"""The stylesheet's quiet text stays readable: muted text and the diff's line
numbers keep WCAG AA's 4.5:1 against every background they are drawn on (the
selected queue row, a deleted or an added line, the page and its cards)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

CSS = (ROOT / "static" / "replayhub" / "app.css").read_text()
AA = 4.5


def rule_value(selector: str, prop: str) -> str:
    """``prop``'s colour in the first rule for ``selector``."""
    block = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", CSS)
    assert block, selector
    found = re.search(rf"(?:^|[;\s]){prop}:\s*(#[0-9a-fA-F]{{6}})", block[1])
    assert found, (selector, prop)
    return found[1]


def variable(name: str) -> str:
    found = re.search(rf"--{name}:\s*(#[0-9a-fA-F]{{6}})", CSS)
    assert found, name
    return found[1]


def luminance(colour: str) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_of_black_on_white_is_21():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0


@pytest.mark.parametrize(
    "background",
    [
        lambda: variable("bg"),
        lambda: variable("card"),
        lambda: rule_value("table.queue tr.row.selected", "background"),
    ],
    ids=["page", "card", "selected queue row"],
)
def test_muted_text_reads_on_every_background_it_sits_on(background):
    assert contrast(variable("muted"), background()) >= AA


@pytest.mark.parametrize("line", ["tr.l-del td.ln", "tr.l-add td.ln"])
def test_the_diffs_line_numbers_read_on_deleted_and_added_lines(line):
    number = rule_value("table.diff td.ln", "color")
    assert contrast(number, rule_value(line, "background")) >= AA


EVIDENCE_CHIPS = [
    ".ev-independently_observed",
    ".ev-human_attested",
    ".ev-unavailable",
]


@pytest.mark.parametrize("chip", EVIDENCE_CHIPS)
def test_every_evidence_chip_reads_on_its_own_background(chip):
    assert contrast(rule_value(chip, "color"), rule_value(chip, "background")) >= AA


def test_an_evidence_chip_is_sized_from_the_root_not_its_small_cell():
    # .8em of a table header's .85em came to 9.9 px; rem keeps 12.8 px.
    size = re.search(r"\.ev\s*\{[^}]*font-size:\s*([.\d]+)(rem|em|px)", CSS)
    assert size and size[2] == "rem" and float(size[1]) >= 0.75
