"""The recorder a developer or CI job runs in place of the agent command.

Standard-library modules, one a job, each importing only the ones before it:
``exits`` (exit codes, refusals), ``scrub`` (keys masked in all it writes),
``redirects`` (HTTP that follows none), ``checkout`` (git), ``endpoint`` (the
recording endpoint), ``delivery`` (push, post, spool) and ``record`` (the
command). ``bundle`` joins them into the one file ``views`` serves for download;
in this package's environment the command is ``replayhub-record``.
"""

from __future__ import annotations
