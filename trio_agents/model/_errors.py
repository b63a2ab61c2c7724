"""Errors of the model layer."""

from __future__ import annotations

from .._errors import TrioAgentsError

__all__ = ["ModelError", "ModelSpecError"]


class ModelSpecError(TrioAgentsError, ValueError):
    """A model spec string (``echo``, ``echo?delay=2.5``, ``openai:MODEL``) is not valid."""


class ModelError(TrioAgentsError):
    """The model failed; the message goes into the turn's error record."""
