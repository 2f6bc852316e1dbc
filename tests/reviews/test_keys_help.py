"""The keyboard help lists every key the pages' scripts handle.

The keys are read from the scripts themselves (each ``case "x":`` and each
``event.key === "x"``), so a key added to a handler and left out of the help
fails here.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from django.conf import settings

from tests.factories import make_replay

SCRIPTS = Path(settings.BASE_DIR) / "static" / "replayhub"
# How the help writes a key whose name is not what it prints.
SHOWN = {
    "ArrowUp": "↑",
    "ArrowDown": "↓",
    "ArrowLeft": "←",
    "ArrowRight": "→",
    "Escape": "Esc",
    " ": "Space",
}


def handled_keys() -> dict[str, set[str]]:
    """Every key name a keydown handler compares with, per script."""
    found: dict[str, set[str]] = {}
    for script in sorted(SCRIPTS.glob("*.js")):
        text = script.read_text()
        if "keydown" not in text:
            continue
        keys = set(re.findall(r'\bcase "([^"]+)":', text))
        keys |= set(re.findall(r'event\.key === "([^"]+)"', text))
        found[script.name] = keys
    return found


def help_keys(page: str) -> set[str]:
    dialog = page.split('<dialog id="keys-help"', 1)[1].split("</dialog>", 1)[0]
    return {html.unescape(key) for key in re.findall(r"<kbd>([^<]+)</kbd>", dialog)}


def test_the_scripts_are_read():
    found = handled_keys()
    # The shortcuts' own table and the diff line numbers' arrows.
    assert {"j", "k", "c", "o", "e", "?"} <= found["keys.js"]
    assert {"ArrowLeft", "ArrowRight"} <= found["comments.js"]


def test_every_handled_key_is_in_the_help(client, reviewer):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)

    listed = help_keys(client.get(f"/replays/{replay.pk}/").content.decode())

    missing = {
        script: sorted(key for key in keys if SHOWN.get(key, key) not in listed)
        for script, keys in handled_keys().items()
    }
    assert missing == {script: [] for script in missing}
