"""A child process that appends to one user's working memory many times.

Run by tests/working/test_store.py: ``python _working_child.py KIND TARGET USER WORKER COUNT``,
KIND being ``sqlite`` (TARGET a folder) or ``postgres`` (TARGET a DSN, TABLE as 6th argument).
"""

from __future__ import annotations

import sys

from agentscope_mem0 import SqliteWorkingStore, WorkingStore
from agentscope_mem0._working.format import WorkingFormat


def main() -> None:
    kind, target, user, worker, count = sys.argv[1:6]
    store: WorkingStore
    if kind == "sqlite":
        store = SqliteWorkingStore(target)
    else:
        from agentscope_mem0 import PostgresWorkingStore

        store = PostgresWorkingStore(target, table=sys.argv[6])
    fmt = WorkingFormat(schema={"type": "object"})
    for index in range(int(count)):
        item = {"items": [f"{worker}-{index}"], "by": {worker: index}}
        store.update(
            user,
            "",
            lambda old, item=item: fmt.apply(old.content if old else None, item, "append"),
            kind="json",
        )
    store.close()


if __name__ == "__main__":
    main()
