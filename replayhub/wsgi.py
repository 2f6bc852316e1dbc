from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")
application = get_wsgi_application()

# Load every view now rather than on the first request, then take everything
# loaded so far out of the garbage collector's sight: its full collections
# would otherwise walk the few hundred thousand objects of Django and the
# project again and again, a pause of tens of milliseconds in whichever
# request happens to trigger one (docs/performance.md).
get_resolver().url_patterns  # noqa: B018 -- imports the views
gc.freeze()
