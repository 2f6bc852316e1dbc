"""The WSGI application loads its views at start-up and freezes what it loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, sys
assert "reviews.trends.views" not in sys.modules
import replayhub.wsgi
print("reviews.trends.views" in sys.modules, gc.get_freeze_count())
"""


def test_the_wsgi_module_imports_the_views_and_freezes_start_up_objects(tmp_path):
    env = {**os.environ, "REPLAYHUB_VAR_DIR": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded, frozen = done.stdout.split()
    # A full collection would otherwise walk all of these on some request.
    assert loaded == "True"
    assert int(frozen) > 50_000
