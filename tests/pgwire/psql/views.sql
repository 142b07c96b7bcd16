CREATE TABLE t (id INT PRIMARY KEY, name STRING, price DOUBLE, at TIMESTAMP, ok BOOLEAN);
CREATE VIEW v AS SELECT id, name, price, at, ok FROM t WHERE ok;
CREATE VIEW totals AS SELECT name, count(*) AS n, sum(price) AS total, max(id) AS top FROM t GROUP BY name;
\dv
\d
\d v
\d totals
\d+ v
\dv+
DROP VIEW totals;
\dv
