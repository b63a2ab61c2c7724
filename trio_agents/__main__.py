"""``python -m trio_agents`` is the ``trio-agents`` command."""

import sys

from .cli import main

sys.exit(main())
