"""Token-set Jaccard similarity: the edge cases a reader would check."""

from __future__ import annotations

import pytest

from replayhub.texttier.similarity import jaccard, tokens


def test_identical_texts_are_fully_similar():
    assert jaccard("Fix the bug in checkout", "Fix the bug in checkout") == 1.0


def test_similarity_is_shared_tokens_over_all_tokens():
    # {a, b, c} and {b, c, d}: two shared of four.
    assert jaccard("a b c", "b c d") == 0.5


def test_case_does_not_matter():
    assert jaccard("Hello World", "hello WORLD") == 1.0


def test_repeated_tokens_count_once():
    assert jaccard("go go go stop", "go stop") == 1.0


@pytest.mark.parametrize(
    ("left", "right"),
    [("", ""), ("", "words here"), ("words here", ""), ("   \n\t", "a")],
)
def test_an_empty_side_gives_zero(left, right):
    assert jaccard(left, right) == 0.0


def test_punctuation_only_has_no_tokens_and_gives_zero():
    assert tokens("?!... -- «»;") == frozenset()
    assert jaccard("?!... -- «»;", "?!... -- «»;") == 0.0


def test_punctuation_and_unicode_whitespace_split_tokens():
    # U+3000 ideographic space, U+00A0 no-break space, U+2014 em dash, U+3002
    # ideographic full stop, U+00BF inverted question mark.
    assert tokens("one\u3000two\u00a0three\u2014four。¿five?") == {
        "one",
        "two",
        "three",
        "four",
        "five",
    }
    assert tokens("snake_case and-dashes") == {"snake", "case", "and", "dashes"}


def test_symbols_and_digits_are_part_of_tokens():
    # Only whitespace and punctuation split: "+", "$" and "=" are symbols.
    assert tokens("x+1 costs $5 a=b") == {"x+1", "costs", "$5", "a=b"}


def test_unicode_letters_are_lowercased_and_compared():
    assert tokens("ÉCOLE Straße ΣΟΦΊΑ") == {"école", "straße", "σοφία"}
    assert jaccard("Привет, мир!", "привет мир") == 1.0
    assert jaccard("日本語 テキスト", "日本語") == 0.5


def test_every_whitespace_and_punctuation_character_of_the_bmp_splits():
    import unicodedata

    for code in range(0x10000):
        char = chr(code)
        if char.isspace() or unicodedata.category(char).startswith("P"):
            assert tokens(f"ab{char}cd") == {"ab", "cd"}, hex(code)
        elif unicodedata.category(char) in ("Ll", "Lu", "Nd", "Sm", "So"):
            assert len(tokens(f"ab{char}cd")) == 1, hex(code)
