"""The text work of the file tools, as plain functions (sans-IO): slices, edits, patterns.

Rules:
- Lines are numbered from 1; a slice past the end is empty, and says how many lines there are.
- An edit replaces exactly one occurrence of ``old_text``: none or several (overlapping ones
  counted) is an error the model reads, naming how to make the text unique. ``old_text``
  empty, or equal to ``new_text``, is an error too (nothing would change).
- A glob pattern is matched against the whole path relative to its base, ``/``-separated:
  ``*`` and ``?`` stay within one path part, ``**`` spans parts (``**/`` may match none),
  ``[...]`` is a character class.
"""

from __future__ import annotations

import re

from ._access import FileAccessError


def select_lines(text: str, offset: int, limit: int) -> str:
    """Lines ``offset`` .. ``offset + limit - 1`` of ``text``, and a last line saying where
    to read on when lines are left."""
    lines = text.splitlines(keepends=True)
    if offset > len(lines) and lines:
        return f"[the file has {len(lines)} lines; offset {offset} is past its end]"
    chosen = lines[offset - 1 : offset - 1 + limit]
    body = "".join(chosen)
    left = len(lines) - (offset - 1 + len(chosen))
    if left > 0:
        if not body.endswith("\n"):
            body += "\n"
        body += f"[... {left} more lines: read on with offset={offset + len(chosen)}]"
    return body


def count_occurrences(text: str, part: str) -> int:
    """How many times ``part`` occurs in ``text``, overlapping occurrences included."""
    count, start = 0, text.find(part)
    while start != -1:
        count += 1
        start = text.find(part, start + 1)
    return count


def replace_once(text: str, old: str, new: str, path: str) -> tuple[str, int]:
    """``text`` with its one occurrence of ``old`` replaced by ``new``, and the line (from 1)
    where it was.

    Raises:
        FileAccessError: ``old`` is empty or equal to ``new``, or does not occur exactly once.
    """
    if not old:
        raise FileAccessError("old_text is empty; to write a whole file, use write_file")
    if old == new:
        raise FileAccessError("old_text and new_text are the same; nothing would change")
    count = count_occurrences(text, old)
    if count == 0:
        raise FileAccessError(
            f"old_text was not found in {path}; read the file and copy the text exactly "
            f"(whitespace and indentation included)"
        )
    if count > 1:
        raise FileAccessError(
            f"old_text occurs {count} times in {path}; include more of the surrounding lines "
            f"so that it occurs once"
        )
    at = text.index(old)
    return text[:at] + new + text[at + len(old) :], text.count("\n", 0, at) + 1


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a glob ``pattern`` (see the module rules)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            negated = body.startswith("!")
            body = body[1:] if negated else body
            out.append(f"[{'^' if negated else ''}{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)
