"""The audit trail as sentences a reviewer reads ("rita confirmed equivalent").

The raw before/after values stay on the event (and in the Django admin); a
page shows each event as a list of parts, some emphasised, which the template
renders escaped. Nothing here builds HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from replayhub.models import VERDICT_CHOICES, ReviewBand
from reviews.together import sentences

# The session key holding the id of the reviewer's latest decision, offered
# for taking back on the next page.
UNDO_SESSION_KEY = "undo_review"
# The decision's id and the replay claimed when it moved on to the next item,
# let go again if the decision is taken back.
UNDO_NEXT_SESSION_KEY = "undo_review_next"

_VERDICTS = dict(VERDICT_CHOICES)


@dataclass
class Sentence:
    """One event: who, then what as (text, emphasised) parts, and a note."""

    actor: str
    parts: list[tuple[str, bool]] = field(default_factory=list)
    note: str = ""

    def say(self, text: str, emphasis: bool = False) -> Sentence:
        self.parts.append((text, emphasis))
        return self

    @property
    def text(self) -> str:
        """The sentence as plain text (tests, logs)."""
        words = "".join(part for part, _ in self.parts)
        text = f"{self.actor} {words}".strip()
        return f"{text} · note: {self.note}" if self.note else text


def _verdict(value) -> str:
    return _VERDICTS.get(str(value), str(value or "no verdict")).lower()


def _band(value) -> str:
    try:
        return ReviewBand(int(value)).label.lower()
    except (TypeError, ValueError):
        return ""


def _clock(value) -> str:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return ""
    return timezone.localtime(when).strftime("%H:%M")


def decision_sentence(review) -> str:
    """The confirmation shown once a decision is recorded."""
    if review.decision == "overturn":
        return (
            f"Replay {review.replay_id}: overturned {_verdict(review.verdict_before)}"
            f" to {_verdict(review.verdict_after)}."
        )
    if review.decision == "confirm":
        return f"Replay {review.replay_id}: confirmed {_verdict(review.verdict_after)}."
    return f"Replay {review.replay_id}: rerun requested."


def meanwhile_sentence(standing, viewer) -> str:
    """What a decision refused as taken from an older page says: who decided
    what since it was opened (``standing``, the decision standing now; None
    when the one the page showed was taken back), and that nothing was
    saved."""
    if standing is None:
        return (
            "The decision this page showed was taken back meanwhile: nothing "
            "was saved. The replay is shown as it stands now; decide again."
        )
    who = (
        "You (in another page)"
        if standing.reviewer_id == viewer.pk
        else standing.reviewer.get_username()
    )
    if standing.decision == "overturn":
        what = (
            f"overturned {_verdict(standing.verdict_before)} to "
            f"{_verdict(standing.verdict_after)}"
        )
    elif standing.decision == "confirm":
        what = f"confirmed {_verdict(standing.verdict_after)}"
    else:
        what = "asked for a rerun"
    at = timezone.localtime(standing.created_at)
    return (
        f"{who} {what} at {at:%H:%M:%S} since this page was opened: nothing "
        "was saved. The page now shows that decision; decide again to add "
        "yours beside it."
    )


def event_sentence(event) -> Sentence:
    """An AuditEvent of a replay or a project as a sentence."""
    actor = event.actor.get_username() if event.actor_id else "The system"
    before, after = event.before or {}, event.after or {}
    s = Sentence(actor=actor, note=str(after.get("note") or ""))
    action = event.action
    if action == "claim.take":
        s.say("claimed this replay")
        if until := _clock(after.get("expires_at")):
            s.say(f" until {until}")
        if band := _band(after.get("review_band")):
            s.say(" from the band ").say(band, True)
    elif action == "claim.release":
        s.say("released this replay")
        if reason := after.get("reason"):
            s.say(f" ({reason})")
    elif action == "review.confirm":
        s.say("confirmed ").say(_verdict(after.get("verdict")), True)
    elif action == "review.overturn":
        s.say("overturned ").say(_verdict(before.get("verdict")), True)
        s.say(" to ").say(_verdict(after.get("verdict")), True)
        if after.get("overruled"):
            s.say(", overruling verified evidence")
    elif action == "review.rerun":
        s.say("asked for a rerun")
        if rerun := after.get("rerun_replay"):
            s.say(f" (replay #{rerun})")
    elif action == "review.undo":
        s.say("took back their ").say(str(before.get("decision", "decision")), True)
        # Back in the queue only when no earlier decision still stands.
        if after.get("review_band") is not None:
            s.say("; the replay is back in the queue")
        else:
            s.say("; an earlier decision still stands")
    elif action == "replay.request":
        if after.get("tier") == "tape":
            s.say("started a replay from the run's tape")
        else:
            s.say("started a replay now")
        if replay := after.get("replay"):
            s.say(f" (replay #{replay})")
        if night := after.get("night"):
            s.say(f", charged to the night of {night}")
    elif action == "tape_replay":
        s.say("asked for a replay of this run from its tape")
        if replay := after.get("replay"):
            s.say(f" (replay #{replay})")
    elif action == "project.create":
        s.say("registered the project")
    elif action == "project.update":
        s.say("changed ").say(", ".join(sorted(after)) or "nothing", True)
    elif not sentences.say(s, action, before, after):
        s.say(action.replace(".", " ").replace("_", " "))
    return s
