"""The fingerprint a budgets card, the project form, the review policy's
form, a label's or a provider's edit form sends with a save
(``reviews.views.stale``), read from the page as a browser has it when the
save is pressed: a post without it is refused."""

from __future__ import annotations

import re

from django.urls import resolve, reverse

# A form's hidden fingerprint, the first after the form's opening tag.
_FIELD = r'<input type="hidden" name="stored" value="([0-9a-f]*)">'


def budget_stored(client, slug: str) -> dict[str, str]:
    """What ``slug``'s budget card on the budgets page sends as ``stored``."""
    html = client.get(reverse("reviews:budgets")).content.decode()
    action = reverse("reviews:budget_edit", args=[slug])
    form = html.split(f'action="{action}"', 1)[1]
    (found,) = re.findall(_FIELD, form.split("</form>", 1)[0])
    return {"stored": found}


def project_stored(client, slug: str) -> dict[str, str]:
    """What the edit form of project ``slug`` sends as ``stored``."""
    html = client.get(reverse("reviews:project_edit", args=[slug])).content.decode()
    (found,) = re.findall(_FIELD, html)
    return {"stored": found}


def form_stored(client, url: str, form_id: str) -> dict[str, str]:
    """What the form ``form_id`` of the page at ``url`` sends as ``stored``."""
    html = client.get(url).content.decode()
    form = html.split(f'id="{form_id}"', 1)[1]
    (found,) = re.findall(_FIELD, form.split("</form>", 1)[0])
    return {"stored": found}


def post_from_page(client, url: str, data: dict, **kwargs):
    """Post ``data`` to a budget card's, a project form's, the review
    policy's, a label's or a provider's edit form's ``url`` with the
    fingerprint its page sends now, as a browser saving from a page just
    opened (a ``stored`` in ``data`` is sent instead)."""
    match = resolve(url)
    if match.url_name == "budget_edit":
        stored = budget_stored(client, match.kwargs["slug"])
    elif match.url_name == "project_review":
        stored = form_stored(client, url, "policy-form")
    elif match.url_name == "project_label_edit":
        stored = form_stored(client, url, "label-form")
    elif match.url_name == "provider_edit":
        stored = form_stored(client, url, "provider-form")
    else:
        assert match.url_name == "project_edit", url
        stored = project_stored(client, match.kwargs["slug"])
    return client.post(url, {**stored, **data}, **kwargs)
