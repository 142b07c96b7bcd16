"""`refimpl sql`: an interactive SQL shell on a data folder or on a server.

`backends` runs SQL, on a data folder through the embedded API (`refimpl.connect`) or on a
server through `POST /exec` (holding a transaction's statements until its COMMIT, since
each request is a session of its own), and gives both answers one shape; `statements` cuts
a text into statements with the project's parser, so each one's answer shows in turn;
`render` shows them (a
table, CSV or JSON) and an error with its position; `completion` completes keywords,
tables and columns; `repl` is the loop: line editing, history across runs, statements over
several lines ending at `;`, and backslash commands (`\\d`, `\\timing`, `\\format`).

May import `refimpl` (the embedded API), `refimpl.errors`, `refimpl.sql` (the parser, to cut
statements as the server does), prompt-toolkit, rich and requests; never the engine's modules
or a protocol layer: the shell is a client like any other.
"""
