"""`ChangeFeeds` keeps each table's description between requests; what it keeps never holds
a dropped database in memory."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from refimpl.engine.access import ADMIN
from refimpl.engine.features.feed_options import FeedOptions
from refimpl.engine.feeds import ChangeFeeds, FeedRequest
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions


def test_a_dropped_database_is_not_kept_by_its_feeds(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path, EngineOptions())
    try:
        feeds = ChangeFeeds(instance)
        admin = instance.session("demo", principal=ADMIN)
        admin.execute("CREATE DATABASE other")
        other = instance.session("other", principal=ADMIN)
        other.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        other.close()
        del other
        database = weakref.ref(instance.database("other"))
        for where in (None, "v > 1", "v > 1"):
            request = FeedRequest("t", FeedOptions(where=where), 0, 10)
            plan = feeds.plan("other", request, ADMIN)
            assert plan.feed.column_names == ("id", "v")
        del plan
        admin.execute("DROP DATABASE other")
        admin.close()
        gc.collect()
        assert database() is None, "the feeds kept the dropped database"
    finally:
        instance.close()
