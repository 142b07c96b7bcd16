"""A LIKE whose worst case runs for seconds, whatever the machine: the filter the statement
timeout tests give a client's chosen sizes.

A pattern of `a_` pieces over runs of `a` a little shorter than the piece makes every place
in the text a candidate, each checked over most of the run before it fails
(`refimpl.engine.query.like`): the cost grows with the text's length times the run's. Runs of
56,000 characters make one 280 KB row seconds of work, several times any test's timeout even
on a machine three times as fast as the one the sizes were chosen on (2.4 s a row there,
loaded), where 7,000-character runs took 0.49 s over 301 KB: under a 500 ms timeout. Three
rows stay under the 1 MB SQL text limit, and the pattern (58 KB) under the request line's
64 KB when a `where=` or `query=` parameter carries it.
"""

from __future__ import annotations

RUN = 55_998  # characters `a` between two `bb`: fewer than the piece's, so it never fits
TEXT = ("a" * RUN + "bb") * 5  # 280 KB
PATTERN = "%" + "a_" * 29_000 + "%"  # 58 KB; no match: every candidate is tried
