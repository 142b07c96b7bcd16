"""SQL text to typed statements and back: the LALR grammar's parser, the frozen AST, the
canonical printer (`parse(to_sql(x)) == x`) and statement templates.

May import `refimpl.errors` only: nothing of the engine or of a protocol layer, so that the
parser can be used and tested on its own.
"""
