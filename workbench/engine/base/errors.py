"""Errors a user can act on.

Every error the engine raises for bad input or a failing component is a ``WorkbenchError`` whose
message says what went wrong and what to do, so the CLI and the window can show it as it is,
without a traceback.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """An error with a message written for the user."""


class ExperimentError(WorkbenchError):
    """The experiment file is invalid; the message names the field and what is wrong."""


class ServerBinaryNotFound(WorkbenchError):
    """No llama-server binary could be found."""


class ModelFileError(WorkbenchError):
    """The model file is missing, unreadable or not a GGUF file."""


class PortInUseError(WorkbenchError):
    """The requested port is already taken by another program."""


class ServerStartError(WorkbenchError):
    """The server exited or never became healthy while starting."""


class ExternalServerError(WorkbenchError):
    """An external server (``--base-url``) does not answer."""


class OutputDirError(WorkbenchError):
    """The output folder cannot be created or written."""


class SessionError(WorkbenchError):
    """A session file cannot be read (missing, corrupt, or from a newer workbench)."""


class ImportFileError(WorkbenchError):
    """Another tool's result file cannot be imported; the message names the format problem."""
