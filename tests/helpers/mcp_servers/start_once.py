"""The tools server, which starts once only: ``python start_once.py STATE``.

The first start creates the file ``STATE`` and serves the tools of ``tools_server.py``; every
later start finds it, says so on stderr and exits with code 1 before speaking MCP (a restart
that fails to start).
"""

import runpy
import sys
from pathlib import Path

state = Path(sys.argv[1])
if state.exists():
    print(f"start_once: {state} exists, refusing to start again", file=sys.stderr)
    sys.exit(1)
state.touch()
runpy.run_path(str(Path(__file__).with_name("tools_server.py")), run_name="__main__")
