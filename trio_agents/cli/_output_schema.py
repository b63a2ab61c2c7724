"""``trio-agents run --output-schema FILE``: the answer as JSON validated by a JSON Schema.

Rules:
- FILE holds one JSON Schema of an object; the turn's typed answer is validated with that
  schema itself (``OutputSchema``, the ``jsonschema`` package) and must be accepted for the
  command to succeed. A file that cannot be read, is not JSON or is not such a schema is a
  :class:`CliError` before anything runs.
- stdout carries the accepted answer only, as one line of JSON; the model's streamed text is
  not printed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..agent import OutputSchema
from ..session import OutputProduced, Record
from ._options import CliError


def load_output_schema(path: str | None) -> OutputSchema | None:
    """The schema of ``--output-schema``, or ``None`` when it was not given.

    Raises:
        CliError: the file cannot be read or is not the JSON Schema of an object.
    """
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            schema = json.load(file)
    except OSError as exc:
        raise CliError(f"--output-schema: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"--output-schema: {path} is not JSON ({exc})") from None
    if not isinstance(schema, dict):
        raise CliError(f"--output-schema: {path} holds no JSON Schema object")
    try:
        return OutputSchema(schema)
    except (ValueError, ImportError) as exc:
        raise CliError(f"--output-schema: {path}: {exc}") from None


def accepted_json(records: Sequence[Record], turn_id: str) -> str | None:
    """The accepted typed answer of turn ``turn_id`` as one line of JSON, or ``None``."""
    for record in reversed(records):
        if isinstance(record, OutputProduced) and record.turn_id == turn_id and not record.problems:
            return json.dumps(record.answer, ensure_ascii=False)
    return None
