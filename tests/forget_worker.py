"""A child process for the forget crash test: killed inside its forgetting transaction.

The forget's last step (recording it) pauses after every other change of the
transaction was made, so the kill lands with all of them written but none
committed.
"""

from __future__ import annotations

import sys
import time

from partner_memory import PartnerMemory, open_store
from partner_memory.store.sql.base import Cursor
from partner_memory.store.sql.forget import ForgetSql

_record = ForgetSql._record


def _slow_record(self: ForgetSql, cur: Cursor, *args: object) -> None:
    _record(self, cur, *args)  # type: ignore[arg-type]
    print("inside", flush=True)
    time.sleep(60)  # killed here


def main(database: str, message_id: str) -> None:
    ForgetSql._record = _slow_record  # type: ignore[method-assign]
    with PartnerMemory(open_store(database), "agent", idle_timer=False) as memory:
        memory.forget_messages([message_id])


if __name__ == "__main__":
    main(*sys.argv[1:3])
