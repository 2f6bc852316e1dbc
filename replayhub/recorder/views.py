"""The recorder, served for download to the machines where agents run."""

from __future__ import annotations

import io

from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, HttpRequest
from django.views.decorators.http import require_GET

from replayhub.recorder import bundle


# The file is the same for everyone and holds no secret: a CI job fetches it
# with curl before it has any credential. It is the package joined into one
# script (``bundle``), made once per process.
@login_not_required
@require_GET
def recorder_download(request: HttpRequest) -> FileResponse:
    return FileResponse(
        io.BytesIO(bundle.source().encode()),
        as_attachment=True,
        filename="replayhub-record.py",
        content_type="text/x-python; charset=utf-8",
    )
