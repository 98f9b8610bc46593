-- sqlite3 workload for the preload test: an in-memory database of 200,000
-- rows built with a recursive CTE, aggregates, an index, sorts, deletes.
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, x % 97, 'name-' || (x * 7919 % 200003), (x * 31 % 1000) / 8.0 FROM c;
SELECT count(*), sum(grp), min(name), max(name), total(val) FROM t;
SELECT grp, count(*), round(avg(val), 4), total(length(name)) FROM t
  GROUP BY grp ORDER BY grp LIMIT 12;
CREATE INDEX t_name ON t(name);
CREATE INDEX t_grp_val ON t(grp, val);
SELECT id, name FROM t WHERE name >= 'name-1000' ORDER BY name LIMIT 15;
SELECT id, name, val FROM t ORDER BY val DESC, name LIMIT 10;
SELECT grp, length(group_concat(name, ',')) FROM t WHERE id % 1000 = 0
  GROUP BY grp ORDER BY 2 DESC, grp LIMIT 5;
SELECT count(DISTINCT name), count(DISTINCT val) FROM t;
CREATE TABLE u AS SELECT grp, name || '-' || id AS k FROM t ORDER BY k DESC;
SELECT count(*), min(k), max(k) FROM u;
SELECT a.grp, count(*) FROM t AS a JOIN u AS b ON b.grp = a.grp
  WHERE a.id < 300 AND b.k LIKE 'name-1%' GROUP BY a.grp ORDER BY a.grp LIMIT 5;
DELETE FROM t WHERE id % 3 = 0;
UPDATE t SET name = upper(name) WHERE id % 5 = 0;
SELECT count(*), sum(id), max(name) FROM t;
PRAGMA integrity_check;
