"""BACKUP DATABASE d TO 'name': the admin user's copy of one database, at one LSN while
writes go on, into a new folder of the backup folder of the data folder
(`EngineOptions.backup_folder`). The name follows the rule of COPY's import folder
(`refimpl.engine.files.folder_path`): a relative path without '..', never led out of the
folder by a symlink; without control characters, of at most 255 bytes a part and 1024 in
all (`_check_name`). The copy is the one `refimpl backup` makes (`storage.backup`), cut at
the LSN durable when the statement began; it holds no lock of the database while it copies.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from typing import Any

from refimpl.engine.files import LeadsOut, NotRelative, folder_path
from refimpl.engine.result import Result, message_result
from refimpl.engine.statements.context import StatementContext, outside_transaction
from refimpl.engine.storage.backup import copy_database, write_manifest
from refimpl.errors import InvalidValue
from refimpl.sql.ast_copy import BackupDatabase


def backup_database(
    context: StatementContext, statement: BackupDatabase, text: str, params: Sequence[Any]
) -> Result:
    context.require_admin_user("BACKUP DATABASE")
    outside_transaction(context, "BACKUP DATABASE")
    database = context.catalog.database(statement.database)
    name = statement.target
    setting = database.options.backup_folder
    folder = database.path.parent / setting
    _check_name(name)
    try:
        target = folder_path(folder, name)
    except NotRelative:
        raise InvalidValue(
            f"BACKUP DATABASE TO '{name}': name a new folder of the backup folder by a relative"
            f" path without '..' (the folder is '{setting}' in the data folder)"
        ) from None
    except LeadsOut:
        raise InvalidValue(
            f"BACKUP DATABASE TO '{name}': the path leads out of the backup folder (a symlink)"
        ) from None
    if target.exists():
        raise InvalidValue(
            f"BACKUP DATABASE TO '{name}': the backup folder holds '{name}' already; name a"
            " new folder"
        )
    durable = database.log.durable_lsn
    target.mkdir(parents=True)
    try:
        copy = copy_database(database.path, target / database.name, database.name, upto_lsn=durable)
        write_manifest(target, [copy])
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return message_result(
        text, f"database '{database.name}' backed up at LSN {copy.lsn} into '{name}'"
    )


# What a file system takes in one part of a path and, with room for the data folder's own
# path before it, in the whole name (Linux: NAME_MAX 255, PATH_MAX 4096 bytes).
PART_BYTES = 255
NAME_BYTES = 1024


def _check_name(name: str) -> None:
    """InvalidValue for a name no file system takes: a control character (NUL among them),
    a part over PART_BYTES or a name over NAME_BYTES bytes of UTF-8."""
    # The name as the message shows it: cut, and its control characters escaped.
    shown = name[:60].encode("unicode_escape").decode("ascii") + ("..." if name[60:] else "")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise InvalidValue(
            f"BACKUP DATABASE TO '{shown}': a folder's name cannot hold a control character"
            " (such as NUL or a line break); name the folder with printable characters"
        )
    encoded = name.encode("utf-8", "surrogatepass")
    longest = max(len(part.encode("utf-8", "surrogatepass")) for part in name.split("/"))
    if len(encoded) > NAME_BYTES or longest > PART_BYTES:
        raise InvalidValue(
            f"BACKUP DATABASE TO '{shown}': the name is too long ({len(encoded)} bytes, its"
            f" longest part {longest}); at most {PART_BYTES} bytes a part and {NAME_BYTES} in all"
        )


HANDLERS: dict[type, Callable[..., Result]] = {BackupDatabase: backup_database}
