CREATE TABLE t (id INT PRIMARY KEY, v INT, e STRING UNIQUE, a INT, b INT, UNIQUE (a, b));
CREATE INDEX t_v_idx ON t (v);
CREATE UNIQUE INDEX t_b_a ON t (b, a);
CREATE TABLE plain (x INT);
CREATE INDEX u_pkey ON plain (x);
CREATE TABLE u (id INT PRIMARY KEY, "Mixed" INT UNIQUE);
ALTER TABLE u REPLICA IDENTITY FULL;
\d t
\d+ t
\di
\d t_v_idx
\d t_pkey
\d+ u
DROP INDEX t_v_idx;
\d t
\dt+
\di+
