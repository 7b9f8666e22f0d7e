from django.apps import AppConfig


class RacesConfig(AppConfig):
    name = "races"
    verbose_name = "Races: every strategy against the same buyers at once"
