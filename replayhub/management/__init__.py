"""The command line: Django's management package.

``commands`` holds one module per ``manage.py`` command, each a thin adapter
around the services; ``project_options`` defines the options that
``project_add`` and ``project_edit`` share, made from
``models.project_settings.SETTINGS``. Commands are wiring: they may import the
people's side, which the domain's own modules never do.
"""
