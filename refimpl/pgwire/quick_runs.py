"""A connection's runs of one prepared statement again and again, answered from what its
first run worked out (`Conversation.run_known`).

A client that runs a prepared statement in a loop sends the same Bind, Describe, Execute
and Sync every time but for the values (`run_messages.RunFrame`), and gets the same
BindComplete, RowDescription and ReadyForQuery back around its rows. A `QuickRun` keeps
those answers as bytes, the values' decoders, the rows' writer and the CommandComplete of
each count, for as long as nothing else is answered on the connection: any other message
drops it (`Conversation` makes a new one at the next run of its general path), so what it
keeps never outlives a Parse, Close, Describe, DEALLOCATE or failed run. What is never kept:
the right, checked at every run, the run itself (the engine's prepared run: admission,
statement timeout, durability) and the statement's result type, checked again whenever the
run answers another list of columns than the one the bytes were made for (a schema change).
"""

from __future__ import annotations

from collections.abc import Callable

from refimpl.engine.result import Column, Result
from refimpl.engine.statements.prepared_runs import PreparedRun
from refimpl.pgwire import messages as m
from refimpl.pgwire.portals import Prepared, check_result_type
from refimpl.pgwire.row_writers import RowsWriter
from refimpl.pgwire.run_messages import BindHead, RunFrame, run_frame
from refimpl.pgwire.tags import command_tag
from refimpl.pgwire.types import ParamDecoders
from refimpl.pgwire.types import formats as _formats

BIND_COMPLETE, NO_DATA = m.BindComplete(), m.NoData()
# A statement's CommandCompletes kept, by count (a SELECT's rows may number many).
_TAGS_KEPT = 64
# Not yet a list of columns: the first run's columns make the bytes.
_UNSHAPED: list[Column] = []


class QuickRun:
    """What the runs of `prepared` framed as `frame` answer alike; one connection's."""

    __slots__ = (
        "frame", "prepared", "run", "params", "result_formats", "described", "said", "columns",
        "prefix", "write", "tags", "_counts_rows",
    )  # fmt: skip

    def __init__(
        self,
        frame: RunFrame,
        prepared: Prepared,
        decoders: ParamDecoders,
        result_formats: tuple[int, ...],
        described: bool,
    ) -> None:
        """`prepared` has an engine run (`Prepared.run`) and takes its values in order;
        `decoders` are its Bind's for the frame's format codes."""
        self.frame = frame
        self.prepared = prepared
        assert prepared.run is not None
        self.run: PreparedRun = prepared.run
        # The Bind's values decoded (InvalidValue as the Bind's own decoding raises it).
        self.params: Callable[[list[bytes | None]], tuple[object, ...]] = decoders.read
        self.result_formats = result_formats
        self.described = described
        # What the run's Bind and Describe answered before it ran (`before_run`).
        self.said: list[m.ServerMessage] | None = None
        # The columns the bytes below are made for (None: a run that answers no rows).
        self.columns: list[Column] | None = _UNSHAPED
        self.prefix = b""  # BindComplete and the Describe's answer
        self.write: RowsWriter = _no_rows
        self.tags: dict[int, bytes] = {}  # a query's CommandComplete by count
        assert prepared.plan is not None and prepared.plan.statement is not None
        name = type(prepared.plan.statement).__name__
        self._counts_rows = name not in ("Insert", "Update", "Delete")  # `command_tag`'s

    @classmethod
    def of(
        cls, prepared: Prepared, bind: m.Bind, described: bool, head: BindHead
    ) -> QuickRun | None:
        """The quick runs of `bind`'s runs (`head` its head, no row limit): None unless
        `prepared` has an engine run that takes the Bind's values as they come, in order
        and typed, their decoders chosen by an earlier Bind."""
        decoders = prepared.decoders.get(bind.param_formats)
        if (
            decoders is None
            or prepared.run is None
            or len(bind.params) != prepared.count
            or not prepared.in_order
            or (not prepared.inferred and prepared.untyped)
        ):
            return None
        frame = run_frame(head, bind.result_formats, described)
        return cls(frame, prepared, decoders, bind.result_formats, described)

    def before_run(self) -> list[m.ServerMessage]:
        """BindComplete, then the Describe's answer where it does not need the run's
        columns: the statement's as described, or NoData for a statement of no rows.
        ProtocolError for result format codes that do not fit the columns."""
        said = self.said
        if said is None:
            prepared = self.prepared
            said = [BIND_COMPLETE]
            if self.described:
                columns = prepared.columns
                if columns is not None:
                    formats = _formats(self.result_formats, len(columns))
                    said.append(prepared.row_shape(columns, formats).description)
                elif not prepared.answers_rows:
                    said.append(NO_DATA)
            self.said = said
        return said

    def shape(self, columns: list[Column] | None) -> None:
        """Make the bytes for a run that answered `columns`: the statement's result type
        checked (NotAllowed when a schema change altered it), then the answers before its
        rows and their writer (ProtocolError for format codes that do not fit them)."""
        prepared = self.prepared
        said = list(self.before_run())
        if columns is not None:
            check_result_type(prepared, columns)
            formats = _formats(self.result_formats, len(columns))
            shape = prepared.row_shape(columns, formats)
            if self.described and prepared.columns is None:  # described by running it
                said.append(shape.description)
            self.write = shape.write
        elif self.described and prepared.columns is None and prepared.answers_rows:
            said.append(NO_DATA)
        self.prefix = b"".join([answer.encode() for answer in said])
        self.columns = columns

    def tag(self, result: Result) -> bytes:
        """The CommandComplete of a run that answered rows (`command_tag`'s), as bytes."""
        count = len(result.rows) if self._counts_rows else result.count
        tag = self.tags.get(count)
        if tag is None:
            if len(self.tags) >= _TAGS_KEPT:
                self.tags.clear()
            plan = self.prepared.plan
            assert plan is not None and plan.statement is not None
            tag = m.CommandComplete(command_tag(plan.statement, result, len(result.rows))).encode()
            self.tags[count] = tag
        return tag


def _no_rows(rows: object) -> bytes:
    raise AssertionError("a run without columns answered rows")
