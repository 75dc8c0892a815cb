"""What ``workbench`` exits with, so that a script or CI can tell what happened."""

from __future__ import annotations

EXIT_ERROR = 1  # bad input, a failed run, or an error the message names
EXIT_REQUESTS_FAILED = 3  # every configuration ran, but some requests failed
EXIT_CONFIG_FAILED = 4  # a configuration failed (its server did not start, or died)
EXIT_NOT_VERIFIED = 5  # a tune ended without a candidate measured to meet its SLO
EXIT_SLO_MISSED = 6  # a watch missed an SLO it was given (one it could not tell does not)
EXIT_CANCELLED = 130  # Ctrl-C, SIGTERM or SIGHUP
