"""Random writes to a table `t (id INT PRIMARY KEY, v INT)` and its rows read back: the
changefeed properties' workload (tests/engine/test_changefeed_properties.py and
tests/engine/test_stream_options.py)."""

from __future__ import annotations

from hypothesis import strategies as st

import refimpl
from refimpl.errors import DuplicateKey

Op = tuple[str, int, int]  # (insert|update|delete, id, v)

ops = st.lists(
    st.tuples(
        st.sampled_from(["insert", "update", "delete"]), st.integers(0, 12), st.integers(0, 20)
    ),
    max_size=20,
)


def run_op(conn: refimpl.Connection, op: Op) -> None:
    kind, ident, value = op
    if kind == "insert":
        try:
            conn.execute(f"INSERT INTO t VALUES ({ident}, {value})")
        except DuplicateKey:
            pass  # the row is there: the write changes nothing
    elif kind == "update":
        conn.execute(f"UPDATE t SET v = {value} WHERE id = {ident}")
    else:
        conn.execute(f"DELETE FROM t WHERE id = {ident}")


def table_rows(conn: refimpl.Connection, where: str = "") -> dict[int, tuple]:
    rows = conn.execute(f"SELECT id, v FROM t {where}").rows
    return {row[0]: tuple(row) for row in rows}
