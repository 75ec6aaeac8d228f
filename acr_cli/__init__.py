"""acr: route coding requests to the right agent CLI and model, verify, escalate, learn."""

__version__ = "0.1.0"
