"""A text sent again is not scanned for its constants again (`session._known_template`), and
runs as the first time did: the same answers, with its rights, its table's schema of the
moment and its errors read at every run."""

from __future__ import annotations

import pytest

from refimpl.engine import session as session_module
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.errors import DuplicateKey, Forbidden, UnknownTable


def test_a_text_sent_again_skips_its_scan_and_answers_the_same(instance: Instance) -> None:
    session_module._known_template.cache_clear()  # the sizes below: this test's texts alone
    admin = instance.session()
    admin.execute("CREATE TABLE known (id BIGINT PRIMARY KEY, v DOUBLE)")
    admin.execute("INSERT INTO known VALUES (1, 0.5), (2, 1.5)")
    select = "SELECT * FROM known WHERE id = 2"
    first = admin.execute(select).rows
    hits = session_module._known_template.cache_info().hits
    assert admin.execute(select).rows == first == [(2, 1.5)]
    assert session_module._known_template.cache_info().hits == hits + 1
    # The same INSERT text twice: the second is the key's duplicate, as written. INSERTs
    # are not kept (their keys are new each time): they would push out the texts sent again.
    insert = "INSERT INTO known VALUES (3, 2.5)"
    size = session_module._known_template.cache_info().currsize
    admin.execute(insert)
    with pytest.raises(DuplicateKey):
        admin.execute(insert)
    assert session_module._known_template.cache_info().currsize == size


def test_rights_and_schema_are_read_at_every_run_of_a_known_text(instance: Instance) -> None:
    admin = instance.session()
    admin.execute("CREATE TABLE kept (id BIGINT PRIMARY KEY, v DOUBLE)")
    admin.execute("INSERT INTO kept VALUES (1, 0.5)")
    admin.execute("CREATE USER carol")
    admin.execute("GRANT SELECT ON kept TO carol")
    carol = instance.session(principal=Principal("carol", False))
    select = "SELECT * FROM kept WHERE id = 1"
    assert carol.execute(select).rows == [(1, 0.5)]
    admin.execute("REVOKE SELECT ON kept FROM carol")
    with pytest.raises(Forbidden):
        carol.execute(select)
    admin.execute("DROP TABLE kept")
    with pytest.raises(UnknownTable):
        admin.execute(select)
    admin.execute("CREATE TABLE kept (id BIGINT PRIMARY KEY, s STRING, v DOUBLE)")
    admin.execute("INSERT INTO kept VALUES (1, 'new', 2.5)")
    assert admin.execute(select).rows == [(1, "new", 2.5)]


def test_long_texts_are_not_kept(instance: Instance) -> None:
    session_module._known_template.cache_clear()
    admin = instance.session()
    admin.execute("CREATE TABLE wide (id BIGINT PRIMARY KEY, s STRING)")
    text = "SELECT * FROM wide WHERE s = '" + "x" * session_module.TEMPLATE_TEXT_KEPT + "'"
    size = session_module._known_template.cache_info().currsize
    assert admin.execute(text).rows == []
    assert admin.execute(text).rows == []
    assert session_module._known_template.cache_info().currsize == size
