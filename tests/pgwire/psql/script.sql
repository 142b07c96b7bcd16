CREATE TABLE t (id INT PRIMARY KEY, name STRING, ts TIMESTAMP);
INSERT INTO t VALUES (1, 'a', '2026-09-24T10:00:00Z'), (2, NULL, '2026-09-24T10:00:01.5Z');
BEGIN;
UPDATE t SET name = 'b' WHERE id = 2;
COMMIT;
SELECT id, name, ts FROM t ORDER BY id;
SELECT count(*) AS n FROM t;
\dt
\d
\l demo
\du admin
SELECT * FROM nowhere;
SELECT 'not reached';
