"""Users, tokens, browser sessions, grants and rights checks: who may do what.

`AccessControl` (in `control`) is the one entry; behind it `store` keeps the records in
`access.json`, `checks` answers whether a principal holds a right, and `statements` runs the
user, token and grant statements. `Right` and `Principal` live in `refimpl.engine.rights`, a
leaf that layers under this one may import; they are re-exported here.

May import: `refimpl.engine.rights`, `refimpl.engine.result`, `refimpl.sql` and
`refimpl.errors`. Must not import storage, query, statements, features, session, instance or
any protocol layer.
"""

from refimpl.engine.access.control import AccessControl
from refimpl.engine.access.store import parse_duration
from refimpl.engine.rights import ADMIN, ANONYMOUS, Principal, Right

__all__ = ["ADMIN", "ANONYMOUS", "AccessControl", "Principal", "Right", "parse_duration"]
