"""The settings on the command line: `refimpl serve`'s setting flags and `refimpl settings`.

Every flag's help names its `kdb.conf` key and its `KDB_<KEY>` variable, and `serve --help`
ends with every setting (those without a flag too); `refimpl settings` shows each setting's
value and where it came from, for the same flags `serve` takes.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from refimpl.settings import (
    CONFIG_NAME,
    DEFAULTS,
    ENV_PREFIX,
    KEYS,
    Settings,
)


@dataclass(frozen=True, slots=True)
class Flag:
    """A flag of `refimpl serve` that sets one setting."""

    key: str
    flag: str
    kind: Callable[[str], object] = str  # what argparse converts the text to
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False  # given without a value: sets the setting to true


FLAGS: tuple[Flag, ...] = (
    Flag("data", "--data", Path, "DIR"),
    Flag("host", "--host", metavar="ADDRESS"),
    Flag("port", "--port", int, "PORT"),
    Flag("threads", "--threads", int, "N"),
    Flag("dev", "--dev", switch=True),
    Flag("static", "--static", Path, "DIR"),
    Flag("pg_port", "--pg-port", int, "PORT"),
    Flag("pg_tls_cert", "--pg-tls-cert", Path, "FILE"),
    Flag("pg_tls_key", "--pg-tls-key", Path, "FILE"),
    Flag("log_format", "--log-format", choices=("text", "json")),
    Flag("memory_mb", "--memory", int, "MB"),
)
_FLAG_OF = {flag.key: flag.flag for flag in FLAGS}


def meanings() -> dict[str, tuple[str, str]]:
    """Each key's (default, meaning), as the table of `Settings`' docstring writes them."""
    found: dict[str, tuple[str, str]] = {}
    for line in (Settings.__doc__ or "").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in KEYS:
            default = cells[1]
            if default.startswith("(see"):  # a note of the docstring's: the value itself
                default = _shown(getattr(DEFAULTS, cells[0]), cells[0])
            found[cells[0]] = (default, cells[2])
    return found


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """The setting flags, each with its meaning, default, kdb.conf key and variable; and
    `--config`."""
    described = meanings()
    for flag in FLAGS:
        default, meaning = described.get(flag.key, (_shown(getattr(DEFAULTS, flag.key)), ""))
        where = f"kdb.conf {flag.key}, {ENV_PREFIX}{flag.key.upper()}"
        text = f"{meaning} (default {default}; {where})"
        if flag.switch:
            parser.add_argument(flag.flag, action="store_true", default=None, help=text)
        else:
            parser.add_argument(
                flag.flag,
                dest=flag.key,
                type=flag.kind,
                metavar=flag.metavar,
                choices=flag.choices,
                help=text.replace("%", "%%"),
            )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"the config file (default DATA/{CONFIG_NAME}, when it exists)",
    )


def unknown_flag_hint(extras: list[str]) -> str:
    """What to say of flags `serve` or `settings` does not take: the setting a flag names
    that has none (set it in kdb.conf or its variable), or the closest flag."""
    for extra in extras:
        if not extra.startswith("--"):
            continue
        name = extra[2:].split("=", 1)[0]
        key = name.replace("-", "_")
        if key in KEYS and key not in _FLAG_OF:
            return (
                f"; the setting {key} has no flag: set it in {CONFIG_NAME} ({key} = ...) or"
                f" as {ENV_PREFIX}{key.upper()}"
            )
        known = [flag.flag for flag in FLAGS] + ["--config", "--sample"]
        close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1)
        if close:
            return f"; did you mean {close[0]}?"
    return ""


def flags_of(options: argparse.Namespace) -> dict[str, object | None]:
    """The settings the flags give (None: not given), for `load_settings`."""
    return {flag.key: getattr(options, flag.key) for flag in FLAGS}


def every_setting() -> str:
    """The epilog of `serve --help`: every setting, its variable, default and meaning."""
    described = meanings()
    lines = [
        f"Every setting, as a line `key = value` of {CONFIG_NAME} (in the data folder), or an",
        f"environment variable {ENV_PREFIX}<KEY>; an environment variable overrides {CONFIG_NAME},",
        "a flag overrides both. `refimpl settings` shows the values in force and their source.",
        "",
    ]
    rows = [
        (
            key,
            f"{ENV_PREFIX}{key.upper()}",
            *described.get(key, (_shown(getattr(DEFAULTS, key)), "")),
        )
        for key in KEYS
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for key, variable, default, meaning in rows:
        lines.append(
            f"  {key:<{widths[0]}}  {variable:<{widths[1]}}  {default:<{widths[2]}}  {meaning}"
        )
    return "\n".join(lines)


def settings_report(settings: Settings, sources: Mapping[str, str]) -> str:
    """`refimpl settings`: a line per setting with its value and where it came from (as
    `load_settings_and_sources` gives them)."""
    rows = [("setting", "value", "from")]
    for key in KEYS:
        source = sources[key]
        if source.startswith("--"):
            source = _FLAG_OF.get(key, source)
        rows.append((key, _shown(getattr(settings, key), key), source))
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(
        f"{key:<{widths[0]}}  {value:<{widths[1]}}  {source}".rstrip()
        for key, value, source in rows
    )


def _shown(value: object, key: str = "") -> str:
    """A value as kdb.conf would write it."""
    if value is None:
        return "(off)" if key == "pg_port" else "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(str(item) for item in value) or "(listen host, loopback)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value)
    # A value with a line break or a control character is shown escaped, on one line.
    return text if re.fullmatch(r"[^\x00-\x1f\x7f]*", text) else repr(text)
