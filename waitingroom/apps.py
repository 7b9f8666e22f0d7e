from django.apps import AppConfig


class WaitingRoomConfig(AppConfig):
    name = "waitingroom"
    verbose_name = "Waiting room"
