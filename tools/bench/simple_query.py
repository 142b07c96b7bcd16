"""The PostgreSQL protocol's simple query at 16 clients, refimpl and PostgreSQL 15 alternately
in one run: what `per_request.py` measures for prepared statements, for texts sent whole.

Two workloads, each a phase of `pgwire.py`'s clients (psycopg, one connection each, the
Query message: `prepare=False`, so psycopg never prepares a text it has seen five times):

- `pg-simple-constants`: `SELECT 1, 2.5, 'x'`, the same text every time (no table: the
  protocol's and the statement's fixed cost alone);
- `pg-simple-select`: a point SELECT of a 10,000-row table by its key, the key written in
  the text (`SELECT * FROM t WHERE id = 1234`): each text parsed, or found by its template.

The run, its rounds and alternation, its figures (rate, CPU per request of each server,
refimpl's switches and user share) and `--before` are `per_request.py`'s; neither workload
has a target of issue 37, so the summary gives the ratio alone.

    python tools/bench/simple_query.py --rounds 3 --seconds 4
    python tools/bench/simple_query.py --no-postgres --before ../before-tree
"""

from __future__ import annotations

import per_request

TARGETS: dict[str, float | None] = {"pg-simple-constants": None, "pg-simple-select": None}

if __name__ == "__main__":
    per_request.compare(__doc__, TARGETS)
