"""``@path`` of an image in a prompt (``chat``, ``run``): the image goes with the prompt.

Rules:
- A word ``@PATH`` of the prompt whose ``PATH`` (``~`` expanded, relative to the current
  directory) ends in ``.png``, ``.jpg``, ``.jpeg``, ``.gif`` or ``.webp`` and names an
  existing file attaches that image (:meth:`~trio_agents.model.ImagePart.from_file`), in the
  order of the words; the word stays in the text, so the model knows which file it was.
- Any other ``@word`` is text, left as it is.
- An image that cannot be sent (over the size bound, not an image, unreadable) is a
  :class:`~._options.CliError` naming the file: nothing is sent.
"""

from __future__ import annotations

import os
import re
from typing import Final

import trio

from ..model import ImageError, ImagePart
from ._options import CliError

_MENTION: Final = re.compile(r"(?<!\S)@(\S+)")
_EXTENSIONS: Final = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def attached_images(text: str) -> tuple[ImagePart, ...]:
    """The images ``text`` names with ``@path`` (see the module rules).

    Raises:
        CliError: a named image cannot be sent; the message names the file and why.
    """
    images = []
    for match in _MENTION.finditer(text):
        path = os.path.expanduser(match[1])
        if not path.lower().endswith(_EXTENSIONS) or not os.path.isfile(path):
            continue
        try:
            images.append(ImagePart.from_file(path))
        except ImageError as exc:
            raise CliError(f"cannot attach @{match[1]}: {exc}") from None
        except OSError as exc:
            raise CliError(f"cannot attach @{match[1]}: {exc.strerror or exc}") from None
    return tuple(images)


async def read_attached_images(text: str) -> tuple[ImagePart, ...]:
    """:func:`attached_images`, reading the files in a worker thread."""
    return await trio.to_thread.run_sync(attached_images, text)
