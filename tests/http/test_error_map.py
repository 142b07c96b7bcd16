"""Errors are mapped once: every class of the one hierarchy has an HTTP status and a SQLSTATE.

The tables are `refimpl.http.error_answers.STATUS` and `refimpl.pgwire.sqlstate.SQLSTATE`,
both most specific first; the classes are those of `refimpl.errors`, which must be all of them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import pytest
from werkzeug.exceptions import MethodNotAllowed

import refimpl
from refimpl import errors
from refimpl.http.error_answers import (
    STATUS,
    closing_answer,
    http_exception_response,
    status_of,
)
from refimpl.pgwire.sqlstate import SQLSTATE

Table = tuple[tuple[type[errors.KdbError], object], ...]


def _subclasses(cls: type[errors.KdbError]) -> Iterator[type[errors.KdbError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _hierarchy() -> list[type[errors.KdbError]]:
    # Every module imported, so that a class defined outside refimpl.errors is seen too.
    for module in pkgutil.walk_packages(refimpl.__path__, "refimpl."):
        if not module.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(module.name)
    return sorted(set(_subclasses(errors.KdbError)), key=lambda cls: cls.__name__)


HIERARCHY = _hierarchy()


def _row(table: Table, cls: type[errors.KdbError]) -> type[errors.KdbError] | None:
    """The class of the first row that maps `cls` (its own or an ancestor's)."""
    return next((row for row, _ in table if issubclass(cls, row)), None)


def test_every_error_class_is_in_the_one_module():
    outside = [f"{cls.__module__}.{cls.__name__}" for cls in HIERARCHY]
    assert [name for name in outside if not name.startswith("refimpl.errors.")] == []
    for name in ("CopyError", "LineError", "MalformedRequest", "RequestTimeout"):
        assert hasattr(errors, name)


@pytest.mark.parametrize("cls", HIERARCHY, ids=lambda cls: cls.__name__)
def test_every_error_class_has_a_status_and_a_sqlstate(cls: type[errors.KdbError]):
    assert _row(STATUS, cls) is not None, f"{cls.__name__} has no HTTP status"
    # The last row of SQLSTATE (KdbError: XX000, internal_error) is for bugs, not a mapping.
    assert _row(SQLSTATE, cls) not in (None, errors.KdbError), f"{cls.__name__} has no SQLSTATE"


@pytest.mark.parametrize("table", [STATUS, SQLSTATE], ids=["STATUS", "SQLSTATE"])
def test_no_row_is_hidden_by_an_earlier_one(table: Table):
    # Most specific first: a row after one of its ancestors' would never be used.
    hidden = [
        (cls.__name__, earlier.__name__)
        for i, (cls, _) in enumerate(table)
        for earlier, _ in table[:i]
        if issubclass(cls, earlier)
    ]
    assert hidden == []


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.MalformedRequest("x"), 400),
        (errors.RequestTargetTooLong("x"), 414),
        (errors.RequestHeadTooLarge("x"), 431),
        (errors.RequestBodyTooLarge("x"), 413),
        (errors.RequestTimeout("x"), 408),
        (errors.LineError(1, 2, "x"), 400),
        (errors.CopyError("x"), 400),
        (errors.TooManyConnections("x"), 503),
    ],
)
def test_the_errors_met_outside_a_request_have_their_status(error: errors.KdbError, status: int):
    assert status_of(error) == status


def test_closing_answers_say_the_status_and_when_to_retry():
    refused = closing_answer(errors.TooManyConnections("the server has 2 connections open"))
    assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"\r\nRetry-After: 1\r\n" in refused and b"Connection: close" in refused
    assert refused.endswith(b'{"error": "the server has 2 connections open"}')
    late = closing_answer(errors.RequestTimeout("the request did not arrive whole"))
    assert late.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"Retry-After" not in late


def test_a_wrong_methods_answer_names_the_allowed_ones_in_one_order():
    # Werkzeug gathers them in a set, whose order differs from one process to the next.
    answer = http_exception_response(
        MethodNotAllowed(valid_methods=["OPTIONS", "POST", "BREW", "GET", "DELETE", "POST"])
    )
    assert ("Allow", "GET, POST, DELETE, OPTIONS, BREW") in answer.headers
    assert b"use GET or POST or DELETE or OPTIONS or BREW" in answer.body
