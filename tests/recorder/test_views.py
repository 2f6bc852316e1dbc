"""The recorder is served for download, to anyone: it is the same static file
for everyone and holds no secret."""

from __future__ import annotations

from django.urls import reverse

from replayhub.recorder import bundle


def test_anyone_downloads_the_recorder_as_one_file(client, db):
    response = client.get(reverse("recorder_download"))
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        'attachment; filename="replayhub-record.py"'
    )
    assert response["Content-Type"].startswith("text/x-python")
    assert b"".join(response.streaming_content) == bundle.source().encode()


def test_the_download_is_read_only(client, db):
    assert client.post(reverse("recorder_download")).status_code == 405
