from django.apps import AppConfig


class ReplayhubConfig(AppConfig):
    name = "replayhub"
    verbose_name = "ReplayHub"
