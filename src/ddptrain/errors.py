"""Errors a user can act on. The worker entry point prints them with the rank, without a traceback."""


class DdptrainError(Exception):
    """Base class: the message says what happened and what to do."""

    exit_code = 1


class ConfigError(DdptrainError):
    exit_code = 2


class DataError(DdptrainError):
    pass


class WeightsError(DdptrainError):
    pass


class CheckpointError(DdptrainError):
    pass


class LaunchError(DdptrainError):
    pass


class NonFiniteLossError(DdptrainError):
    pass
