"""Message and stream values: frozen, and detached from the caller's dicts."""

from __future__ import annotations

import attrs
import pytest

from trio_agents._errors import TrioAgentsError
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelError,
    ModelRequest,
    ModelSpecError,
    ToolCallRequested,
    ToolSpec,
    Usage,
    UserText,
)
from trio_agents.model._messages import ToolCallPart


def test_messages_are_frozen() -> None:
    """Messages cannot be changed after they are built."""
    message = UserText("hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


def test_arguments_are_copied_from_the_callers_dict() -> None:
    """Mutating the dict passed in does not change a built call or spec."""
    arguments = {"command": "ls"}
    part = ToolCallPart("c", "bash", arguments)
    requested = ToolCallRequested("c", "bash", arguments)
    spec = ToolSpec("bash", "run", arguments)
    arguments["command"] = "rm -rf /"
    assert part.arguments == requested.arguments == spec.parameters == {"command": "ls"}


def test_request_defaults_to_no_tools() -> None:
    """A ModelRequest without tools offers none."""
    assert ModelRequest((UserText("x"),)).tools == ()


def test_finish_reason_is_a_str_enum() -> None:
    """FinishReason values are the wire strings."""
    assert [str(r) for r in FinishReason] == ["stop", "tool_calls", "length", "error"]
    assert Finished(FinishReason("length")).usage == Usage(0, 0)


def test_model_errors_derive_from_the_package_base() -> None:
    """Both model errors are TrioAgentsError; a spec error is also a ValueError."""
    assert issubclass(ModelError, TrioAgentsError)
    assert issubclass(ModelSpecError, TrioAgentsError)
    assert issubclass(ModelSpecError, ValueError)
