"""Line comments: threads on a line range of a diff or of a test output.

The quoted excerpt is cut on the server from the stored diff or output, never
taken from the browser. Bodies are plain text, rendered escaped with their
line breaks.
"""

from __future__ import annotations

from django import forms
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from replayhub.models import Comparison, Replay, TestOutcome
from reviews.models import AuditEvent, Comment, CommentTarget
from reviews.replay_page.diffs import split_files
from reviews.together.notices import mentioned_users, notify, unknown_mentions

MAX_BODY = 10_000
MAX_EXCERPT_LINES = 40
DIFF_FIELDS = {
    CommentTarget.DOD: "diff_of_diffs",
    CommentTarget.ORIGINAL: "original_patch",
    CommentTarget.REPLAY: "replay_patch",
}


class CommentRefused(Exception):
    """The comment cannot be added (one line, for the user); ``field`` names
    the comment form's field at fault: the file or output, or its lines."""

    def __init__(self, message: str, *, field: str = "path") -> None:
        super().__init__(message)
        self.field = field


def _refuse_unknown_mentions(body: str) -> str:
    unknown = unknown_mentions(body)
    if unknown:
        names = ", ".join(f"@{name}" for name in unknown)
        raise forms.ValidationError(
            f"No reviewer is called {names}: mention someone on the list, "
            "or drop the @."
        )
    return body


class CommentPlaceForm(forms.Form):
    """Where a comment goes: the lines of a diff or a test output."""

    # The labels are the comment form's, so a refusal names what the user sees.
    target = forms.ChoiceField(label="On", choices=CommentTarget.choices)
    path = forms.CharField(label="File or output", max_length=1000)
    side = forms.ChoiceField(
        label="Side",
        choices=[("new", "new"), ("old", "old"), ("", "—")],
        required=False,
    )
    line_start = forms.IntegerField(label="Lines", min_value=1, max_value=10_000_000)
    line_end = forms.IntegerField(
        label="Lines", min_value=1, max_value=10_000_000, required=False
    )

    def clean(self):
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        start, end = data.get("line_start"), data.get("line_end")
        if start and end and end < start:
            self.add_error("line_end", "The range ends before it starts.")
        if data.get("target") != CommentTarget.TESTS and not data.get("side"):
            data["side"] = "new"
        if data.get("target") == CommentTarget.TESTS:
            data["side"] = ""
        return data

    def place(self) -> Comment:
        """The anchor as an unsaved comment, to name it (``.anchor``)."""
        data = self.cleaned_data
        return Comment(
            target=data["target"],
            path=data["path"],
            side=data["side"],
            line_start=data["line_start"],
            line_end=data.get("line_end") or data["line_start"],
        )


class CommentForm(CommentPlaceForm):
    body = forms.CharField(
        label="Comment", max_length=MAX_BODY, widget=forms.Textarea(attrs={"rows": 3})
    )

    def clean_body(self) -> str:
        return _refuse_unknown_mentions(self.cleaned_data["body"])


class ReplyForm(forms.Form):
    body = forms.CharField(
        max_length=MAX_BODY, widget=forms.Textarea(attrs={"rows": 2})
    )

    def clean_body(self) -> str:
        return _refuse_unknown_mentions(self.cleaned_data["body"])


def test_output_key(outcome: TestOutcome) -> str:
    return f"{outcome.tree} run {outcome.attempt}"


def excerpt(
    replay: Replay, *, target: str, path: str, side: str, start: int, end: int
) -> str:
    """The lines a comment points at; CommentRefused when they do not exist."""
    if target == CommentTarget.TESTS:
        for outcome in replay.test_outcomes.only("tree", "attempt", "output_tail"):
            if test_output_key(outcome) == path:
                lines = outcome.output_tail.splitlines()
                if start > len(lines):
                    raise CommentRefused(
                        "there is no such line in the test output",
                        field="line_start",
                    )
                return "\n".join(lines[start - 1 : min(end, start + MAX_EXCERPT_LINES)])
        raise CommentRefused("there is no such test output")
    text = (
        Comparison.objects.filter(replay=replay)
        .values_list(DIFF_FIELDS[CommentTarget(target)], flat=True)
        .first()
    )
    files = [file for file in split_files(text or "") if file.path == path]
    if not files:
        raise CommentRefused("that file is not in that diff")
    for file in files:
        picked = [
            line.text
            for line in file.lines
            if line.kind not in ("hunk", "note")
            and (number := line.old if side == "old" else line.new) is not None
            and start <= number <= end
        ]
        if picked:
            return "\n".join(picked[:MAX_EXCERPT_LINES])
    raise CommentRefused("there is no such line in that diff", field="line_start")


def _mention(comment: Comment, author) -> None:
    for user in mentioned_users(comment.body, exclude=author):
        notify(
            user=user,
            actor=author,
            kind="mention",
            replay_id=comment.replay_id,
            thread_id=comment.parent_id or comment.pk,
            text=f"{author.get_username()} mentioned you on replay "
            f"{comment.replay_id}: {comment.body[:200]}",
            blind_text=f"{author.get_username()} mentioned you on replay "
            f"{comment.replay_id}.",
        )


def comment_add(*, replay: Replay, author, data: dict) -> Comment:
    start = data["line_start"]
    end = data.get("line_end") or start
    quoted = excerpt(
        replay,
        target=data["target"],
        path=data["path"],
        side=data["side"],
        start=start,
        end=end,
    )
    with transaction.atomic():
        comment = Comment.objects.create(
            replay=replay,
            author=author,
            target=data["target"],
            path=data["path"],
            side=data["side"],
            line_start=start,
            line_end=end,
            excerpt=quoted,
            body=data["body"],
        )
        AuditEvent.objects.record(
            actor=author,
            action="comment.add",
            replay_id=replay.pk,
            after={"comment": comment.pk, "on": comment.anchor, "text": data["body"]},
        )
        _mention(comment, author)
    return comment


def comment_reply(*, thread: Comment, author, body: str) -> Comment:
    with transaction.atomic():
        comment = Comment.objects.create(
            replay_id=thread.replay_id, author=author, parent=thread, body=body
        )
        AuditEvent.objects.record(
            actor=author,
            action="comment.reply",
            replay_id=thread.replay_id,
            after={"comment": comment.pk, "thread": thread.pk, "text": body},
        )
        _mention(comment, author)
    return comment


def comment_resolve(*, thread: Comment, user, resolved: bool) -> bool:
    """Resolve (or reopen) a thread; False when it already was."""
    with transaction.atomic():
        rows = Comment.objects.filter(pk=thread.pk, parent__isnull=True)
        if resolved:
            changed = rows.filter(resolved_at__isnull=True).update(
                resolved_at=timezone.now(), resolved_by=user
            )
        else:
            changed = rows.filter(resolved_at__isnull=False).update(
                resolved_at=None, resolved_by=None
            )
        if changed:
            AuditEvent.objects.record(
                actor=user,
                action="comment.resolve" if resolved else "comment.reopen",
                replay_id=thread.replay_id,
                after={"thread": thread.pk},
            )
    return bool(changed)


def threads(replay_id: int) -> list[Comment]:
    """The replay's threads, oldest first, each with ``.shown_replies``."""
    comments = list(
        Comment.objects.filter(replay_id=replay_id).select_related(
            "author", "resolved_by"
        )
    )
    roots = [c for c in comments if c.parent_id is None]
    by_parent: dict[int, list[Comment]] = {}
    for c in comments:
        if c.parent_id is not None:
            by_parent.setdefault(c.parent_id, []).append(c)
    for root in roots:
        root.shown_replies = by_parent.get(root.pk, [])  # type: ignore[attr-defined]
    return roots


def own_only(roots: list[Comment], user) -> tuple[list[Comment], int]:
    """``user``'s own comments of ``threads``, and how many others wrote.

    Under blind review a comment such as "this diverges" tells the answer, so
    a reviewer who has not judged the replay reads only what they wrote: their
    threads, without others' replies.
    """
    mine: list[Comment] = []
    others = 0
    for root in roots:
        replies = root.shown_replies  # type: ignore[attr-defined]
        if root.author_id != user.pk:
            others += 1 + sum(1 for r in replies if r.author_id != user.pk)
            continue
        own = [r for r in replies if r.author_id == user.pk]
        others += len(replies) - len(own)
        root.shown_replies = own  # type: ignore[attr-defined]
        mine.append(root)
    return mine, others


def thread(thread_id: int) -> Comment:
    """One thread with ``.shown_replies``, as ``threads`` gives each."""
    root = Comment.objects.select_related("author", "resolved_by").get(
        pk=thread_id, parent__isnull=True
    )
    root.shown_replies = list(  # type: ignore[attr-defined]
        root.replies.select_related("author")
    )
    return root


def open_count(replay_id: int) -> int:
    return Comment.objects.filter(
        replay_id=replay_id, parent__isnull=True, resolved_at__isnull=True
    ).count()


def unresolved(replay_ids: list[int], *, author=None) -> dict[int, int]:
    """Unresolved threads per replay, for those that have any; only those
    ``author`` opened when given (blind review: others' threads are unseen)."""
    found = Comment.objects.filter(
        replay_id__in=replay_ids, parent__isnull=True, resolved_at__isnull=True
    )
    if author is not None:
        found = found.filter(author=author)
    rows = found.values("replay_id").annotate(
        n=Count("id", filter=Q(resolved_at__isnull=True))
    )
    return {row["replay_id"]: row["n"] for row in rows}


def as_json(replay_id: int) -> list[dict]:
    """The threads for the API: plain data, replies nested."""
    return [
        {
            "id": root.pk,
            "on": {
                "target": root.target,
                "path": root.path,
                "side": root.side or None,
                "line_start": root.line_start,
                "line_end": root.line_end,
            },
            "excerpt": root.excerpt,
            "author": root.author.get_username(),
            "body": root.body,
            "created_at": root.created_at,
            "resolved": root.resolved_at is not None,
            "resolved_by": root.resolved_by.get_username()
            if root.resolved_by
            else None,
            "replies": [
                {
                    "id": reply.pk,
                    "author": reply.author.get_username(),
                    "body": reply.body,
                    "created_at": reply.created_at,
                }
                for reply in root.shown_replies  # type: ignore[attr-defined]
            ],
        }
        for root in threads(replay_id)
    ]


# A refused comment from the replay page's form, kept for the page the refusal
# redirects to: what was typed, and each problem under the label it is about.
DRAFT_KEY = "comment_draft.{}"
# Each field of the form, with the id of its box on the page.
DRAFT_FIELDS = {
    "target": "comment-target",
    "path": "comment-path",
    "side": "comment-side",
    "line_start": "comment-start",
    "line_end": "comment-end",
    "body": "comment-body",
}


def keep_draft(
    session,
    replay_id: int,
    form: CommentForm,
    refusal: str,
    *,
    refused_on: str = "path",
) -> None:
    """What was typed, and the problems, each as (box id, label, message);
    ``refusal`` is said under the field ``refused_on``."""
    values = {
        name: str(form.data.get(name, ""))[: MAX_BODY if name == "body" else 1000]
        for name in DRAFT_FIELDS
    }
    problems = [
        (DRAFT_FIELDS[name], str(form.fields[name].label), str(message))
        for name, messages in form.errors.items()
        if name in DRAFT_FIELDS
        for message in messages
    ]
    problems += [("", "", str(message)) for message in form.non_field_errors()]
    if refusal:
        box = DRAFT_FIELDS[refused_on]
        problems.append((box, str(form.fields[refused_on].label), refusal))
    session[DRAFT_KEY.format(replay_id)] = {"typed": values, "problems": problems}


def take_draft(session, replay_id: int) -> dict:
    """The draft kept for this replay's page, taken out as it is shown."""
    draft = session.pop(DRAFT_KEY.format(replay_id), None)
    return draft if isinstance(draft, dict) else {}
