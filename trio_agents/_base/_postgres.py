"""The PostgreSQL connections the session store and the work queue open: one policy for both.

Rules:
- A connection is in autocommit mode: each caller draws its own transactions (or sends one
  statement, or one pipeline: an implicit transaction).
- The server ends a connection that idles ``stalled_after`` seconds inside a transaction: the
  transactions are short, so such a client was stopped mid-transaction (SIGSTOP), and the row
  locks it holds would keep every other worker from taking its sessions over.
- psycopg is imported on first use, so the package works without the ``postgres`` extra.
"""

from __future__ import annotations

import contextlib
from typing import Any


def connect_postgres(dsn: str, stalled_after: float) -> Any:
    """A new autocommit connection to ``dsn`` (giving up after 10 s unless the DSN says
    otherwise), ended by the server when it idles ``stalled_after`` seconds in a transaction.
    """
    import psycopg

    if "connect_timeout" in dsn:
        conn = psycopg.connect(dsn, autocommit=True)
    else:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    conn.execute(
        "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
        (str(max(1, round(stalled_after * 1000))),),
    )
    return conn


def close_quietly(conn: Any) -> None:
    """Close ``conn``, ignoring a connection that is already broken."""
    import psycopg

    with contextlib.suppress(psycopg.Error):
        conn.close()
