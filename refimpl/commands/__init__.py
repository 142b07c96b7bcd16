"""What the command line's longer subcommands do, apart from reading their flags.

`progress` shows a long task's progress (a rich bar on a terminal, log lines otherwise);
`importing` is `refimpl import`; `backup` is `refimpl backup` and `refimpl restore`;
`settings_view` is `refimpl serve`'s setting flags, its `--help` and `refimpl settings`;
`supervise` is `refimpl supervise` (a server kept across the suite's restarts) and
`suite_server` its `start` (a throwaway server for examples with settings). On top with
`cli.py`: may import everything of refimpl; nothing but `cli.py` imports it.
"""
