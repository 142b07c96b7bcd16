"""The change features: what the engine makes of the committed changes in its log.

- The change stream: `change_stream` reads a table's changes back from the write-ahead log
  (`changes()`, `/api/changes`) as `Change` records, the one record every outlet uses.
- The changefeed options, declared once: `feed_options` (the declaration and its rules,
  applied to `Change` records), `stream_options` (the event stream's reading through them),
  `initial_copy` (`initial=true`: a table's rows, then its changes).
- The event stream's engine half: `event_cursor` (event ids, a transaction's events encoded
  once by `EventShape`, one stream's cursor), `recent_transactions` (the recent transactions
  streams share).
- Live queries (`SUBSCRIBE`): `live_shape` (what a live query may be), `live_queries` (the
  subscriptions and their answers), `live_runs` (their runs, shared), `live_steps` (the step
  a commit's first subscriber keeps for the others), `live_answers` (`LiveAnswer`, versions,
  replies), kept up to date commit by commit by `live_maintain`, `live_maintainers`,
  `live_groups` and `live_window`, or re-run where a commit touched (`buckets` for time
  buckets, `top_n` for ordered top-N queries).
- `kdb_rev()`: revisions in SQL (`kdb_rev`).

May import: `statements`, `query`, `storage`, `tracking`, the engine's leaf modules,
`refimpl.sql` and `refimpl.errors`. Must not import `access`, `session`, `instance`, `feeds`
or any protocol layer.
"""
