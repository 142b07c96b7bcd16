"""`python -m refimpl` is the same as the `refimpl` command."""

from refimpl.cli import main

raise SystemExit(main())
