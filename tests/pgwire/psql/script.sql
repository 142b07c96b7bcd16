CREATE TABLE t (id INT PRIMARY KEY, name STRING, ts TIMESTAMP);
INSERT INTO t VALUES (1, 'a', '2026-09-24T10:00:00Z'), (2, NULL, '2026-09-24T10:00:01.5Z');
BEGIN;
UPDATE t SET name = 'b' WHERE id = 2;
COMMIT;
SELECT id, name, ts FROM t ORDER BY id;
SELECT count(*) AS n FROM t;
\dt
\d
\d t
\copy t (id, name) from stdin
3	c
4	tab\there
\.
\copy (SELECT id, name FROM t ORDER BY id) to stdout
\copy t (id, name) to stdout with (format csv, header true)
\l demo
\du admin
SELECT * FROM nowhere;
SELECT 'not reached';
