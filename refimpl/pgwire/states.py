"""The states of one protocol connection and what moves them: a transition table as data.

A connection starts in STARTUP, where packets have no type byte (an SSLRequest answered 'N'
keeps it there, one answered 'S' moves it to SECURING until the TLS handshake is done, where
any packet at all is a violation: bytes sent before the handshake were not encrypted; a
CancelRequest ends it). The StartupMessage moves it to STARTING, where the
server decides: a password request moves it to AUTHENTICATING until the password comes back,
ReadyForQuery to READY. In READY every message is delivered; an error answered to a message
of the extended protocol moves it to SKIPPING, where messages are dropped up to the next Sync
(as PostgreSQL does: a client pipelines Parse/Bind/Execute and must not have the later ones
run after the first failed). A CopyInResponse moves READY to COPY_IN, where only the copy's
data, its end or its failure is delivered (Flush and Sync are dropped, as PostgreSQL ignores
them there); CopyDone or CopyFail move it back to READY, and so does an error the server
answers (to SKIPPING for a COPY of the extended protocol). In READY, copy messages are
dropped: they are what a client still sends after its COPY failed. Terminate, a refused
startup or a protocol error ends in CLOSED.

`RECEIVED[(state, message type)]` and `SENT[(state, message type)]` give the next state and,
for received messages, whether the message is delivered or dropped; a pair not in the table
is a protocol violation (UnexpectedMessage for the client, a bug for the server).
"""

from __future__ import annotations

import enum
from typing import Final

from refimpl.pgwire import messages as m


class State(enum.Enum):
    STARTUP = "startup"
    SECURING = "securing"  # 'S' answered; the TLS handshake is under way
    STARTING = "starting"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    SKIPPING = "skipping"  # after an error in the extended protocol, until Sync
    COPY_IN = "copy in"  # COPY FROM STDIN: the client sends the rows
    CLOSED = "closed"

    # Hashed by identity (a member is its only instance): Enum's own __hash__ is Python
    # code, and the transition tables are looked up with a state for every message.
    __hash__ = object.__hash__


class Action(enum.Enum):
    DELIVER = "deliver"
    DROP = "drop"


# The members every message's path compares with (`core.state is READY`), read once: in
# Python 3.11 a member read off an Enum class (`State.READY`) goes through the metaclass's
# __getattr__ hook (slot_tp_getattr_hook), about 900 machine instructions a read in callgrind,
# where a module's global costs a few dozen.
READY: Final = State.READY
CLOSED: Final = State.CLOSED
SECURING: Final = State.SECURING
DELIVER: Final = Action.DELIVER

S = State
_COMMANDS = (
    m.Query,
    m.Parse,
    m.Bind,
    m.Describe,
    m.Execute,
    m.Close,
    m.Flush,
    m.Sync,
    m.FunctionCall,
)
COPY_MESSAGES = (m.CopyData, m.CopyDone, m.CopyFail)

RECEIVED: Final[dict[tuple[State, type], tuple[State, Action]]] = {
    (S.STARTUP, m.SslRequest): (S.STARTUP, Action.DELIVER),
    (S.STARTUP, m.GssEncRequest): (S.STARTUP, Action.DELIVER),
    (S.STARTUP, m.CancelRequest): (S.CLOSED, Action.DELIVER),
    (S.STARTUP, m.Startup): (S.STARTING, Action.DELIVER),
    (S.AUTHENTICATING, m.Password): (S.STARTING, Action.DELIVER),
    (S.AUTHENTICATING, m.Terminate): (S.CLOSED, Action.DROP),
    **{(S.READY, kind): (S.READY, Action.DELIVER) for kind in _COMMANDS},
    **{(S.READY, kind): (S.READY, Action.DROP) for kind in COPY_MESSAGES},
    (S.READY, m.Terminate): (S.CLOSED, Action.DELIVER),
    **{(S.SKIPPING, kind): (S.SKIPPING, Action.DROP) for kind in _COMMANDS + COPY_MESSAGES},
    (S.SKIPPING, m.Sync): (S.READY, Action.DELIVER),
    (S.SKIPPING, m.Terminate): (S.CLOSED, Action.DELIVER),
    (S.COPY_IN, m.CopyData): (S.COPY_IN, Action.DELIVER),
    (S.COPY_IN, m.CopyDone): (S.READY, Action.DELIVER),
    (S.COPY_IN, m.CopyFail): (S.READY, Action.DELIVER),
    (S.COPY_IN, m.Flush): (S.COPY_IN, Action.DROP),
    (S.COPY_IN, m.Sync): (S.COPY_IN, Action.DROP),
    (S.COPY_IN, m.Terminate): (S.CLOSED, Action.DELIVER),
}

# What the server's answers do to the state. An ErrorResponse in READY goes to SKIPPING only
# when it answers an extended-protocol message: the core decides that (see core.Connection).
_ANSWERS = (
    m.RowDescription,
    m.DataRows,
    m.CommandComplete,
    m.EmptyQueryResponse,
    m.ErrorResponse,
    m.ParseComplete,
    m.BindComplete,
    m.CloseComplete,
    m.NoData,
    m.PortalSuspended,
    m.ParameterDescription,
    m.ReadyForQuery,
    m.ParameterStatus,
    m.CopyOutResponse,
    m.CopyData,
    m.CopyDone,
    m.NotificationResponse,
)
SENT: Final[dict[tuple[State, type], State]] = {
    (S.STARTUP, m.SslRefused): S.STARTUP,
    (S.STARTUP, m.SslAccepted): S.SECURING,
    (S.STARTUP, m.ErrorResponse): S.CLOSED,
    (S.STARTING, m.AuthenticationCleartextPassword): S.AUTHENTICATING,
    (S.STARTING, m.AuthenticationOk): S.STARTING,
    (S.STARTING, m.ParameterStatus): S.STARTING,
    (S.STARTING, m.BackendKeyData): S.STARTING,
    (S.STARTING, m.ReadyForQuery): S.READY,
    (S.STARTING, m.ErrorResponse): S.CLOSED,
    (S.AUTHENTICATING, m.ErrorResponse): S.CLOSED,
    **{(S.READY, kind): S.READY for kind in _ANSWERS},
    (S.READY, m.CopyInResponse): S.COPY_IN,
    # A notice or a shutdown error may go out while a client's messages are being skipped.
    (S.SKIPPING, m.ErrorResponse): S.SKIPPING,
    (S.SKIPPING, m.ReadyForQuery): S.READY,
}

# States whose packets carry no type byte.
UNTYPED: Final = frozenset({S.STARTUP, S.SECURING})
