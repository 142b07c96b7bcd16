"""Change tracking: what the engine tells waiting parties about commits.

Revisions (per table and per key range), the commit signal and keyed wake-ups, the shared
state lock, results computed once for every concurrent asker, and the SELECT result cache
kept while its revisions stand still.

May import: the engine's leaf modules, `refimpl.sql` and `refimpl.errors`. Must not import
`storage` or any layer above it: storage reports commits to tracking, so tracking never
looks back into tables or the log.
"""
