"""The text tier: a recorded task's prompt sent as one completion to another
provider and model, compared with the original output by token-set Jaccard
similarity and, optionally, a judge model's 1-10 equivalence score.

It answers "would another model have said the same?", never "does the change
reproduce?": nothing here reaches a verdict. ``similarity`` and ``judge`` are
pure; ``client`` makes the calls from the host; ``replay`` runs one text
replay; ``services`` holds the workflows (command, page, suites, the night).
"""

from __future__ import annotations
