"""The recorder a developer or CI job runs in place of the agent command
(``record``: one standard-library file, also served for download by ``views``)."""

from __future__ import annotations
