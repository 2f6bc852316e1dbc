"""Which recorded evidence a reviewer's corrected verdict would overrule.

A pure rule over the replay's stored checks: no Django import. A reviewer may
overrule anything, but overruling cryptographically verified evidence (two tree
hashes that differ, or that are equal) is rarely meant, so it asks for a
second, explicit yes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from replayhub.verdicts.facts import EvidenceClass

IDENTICAL = "identical"
VERIFIED = EvidenceClass.CRYPTOGRAPHICALLY_VERIFIED.value
# The stored name of the tree hash comparison (older records used the second).
TREE_CHECKS = {"tree identity", "trees identical"}


def _name(check: Mapping) -> str:
    return str(check.get("name", "")).replace("_", " ").strip().lower()


def contradicted(checks: Iterable[Mapping], verdict_after: str) -> list[str]:
    """Sentences naming each verified check that ``verdict_after`` contradicts.

    Calling a replay identical contradicts a failed tree identity check; calling
    it anything else contradicts a passed one. Empty when nothing is overruled.
    """
    found = []
    for check in checks:
        if check.get("evidence_class") != VERIFIED or _name(check) not in TREE_CHECKS:
            continue
        outcome = check.get("outcome")
        detail = str(check.get("detail") or "").strip()
        if outcome == "fail" and verdict_after == IDENTICAL:
            found.append(
                "The tree identity check failed"
                + (f" ({detail.rstrip('.')})" if detail else "")
                + ", so the trees are not identical."
            )
        elif outcome == "pass" and verdict_after and verdict_after != IDENTICAL:
            found.append(
                "The tree identity check passed"
                + (f" ({detail.rstrip('.')})" if detail else "")
                + ", so the trees are identical."
            )
    return found
