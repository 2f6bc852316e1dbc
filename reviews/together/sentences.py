"""Audit sentences for working together: comments, labels, second opinions, gold,
hand-off. ``say`` adds the words to a trail Sentence; False for other actions."""

from __future__ import annotations


def _short(text, limit: int = 140) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def say(s, action: str, before: dict, after: dict) -> bool:
    if action == "comment.add":
        s.say("commented on ").say(str(after.get("on", "a line")), True)
        s.say(f": “{_short(after.get('text'))}”")
    elif action == "comment.reply":
        s.say("replied: ").say(f"“{_short(after.get('text'))}”")
    elif action == "comment.resolve":
        s.say("resolved a comment thread")
    elif action == "comment.reopen":
        s.say("reopened a comment thread")
    elif action == "second_opinion.ask":
        s.say("asked for a second opinion")
        if why := after.get("why"):
            s.say(f" ({_short(why)})")
    elif action == "second_opinion.required":
        s.say("decided; the project asks for a second opinion on an ")
        s.say(str(after.get("why", "")), True)
    elif action in ("second_opinion.agree", "second_opinion.disagree"):
        agreed = action.endswith(".agree")
        s.say("gave the second opinion ").say(str(after.get("second") or "rerun"), True)
        s.say(", agreeing with " if agreed else ", disagreeing with ")
        s.say(str(before.get("first") or "rerun"), True)
    elif action == "second_opinion.give":
        s.say("gave the second opinion")
    elif action == "gold.mark":
        s.say("marked this replay gold, settled as ").say(str(after.get("gold")), True)
    elif action == "gold.unmark":
        s.say("removed this replay from the gold items")
    elif action == "gold.judge":
        s.say("judged this gold item ").say(str(after.get("verdict") or "rerun"), True)
        s.say(" (agrees)" if after.get("agrees") else " (disagrees)")
    elif action == "claim.reassign":
        s.say("assigned this replay to ").say(str(after.get("claimed_by")), True)
        if before.get("claimed_by"):
            s.say(f" (held by {before['claimed_by']})")
    else:
        return False
    if labels := after.get("labels"):
        s.say(" · labels: " + ", ".join(f"{k}={v}" for k, v in labels.items()))
    return True
