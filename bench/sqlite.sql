-- sqlite: an in-memory database built, indexed, queried and rewritten.
--
-- Run by the benchmark as
--   sqlite3 :memory: '.parameter set @rows 150000' '.read bench/sqlite.sql'
-- sqlite's page cache, its parser and its b-tree cells all come from malloc,
-- so this is a real program whose heap is many small, short-lived blocks
-- plus a growing cache.  @rows sets the size (default below if unset).

CREATE TEMP TABLE conf AS SELECT coalesce(@rows, 150000) AS rows;

CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, price REAL, note TEXT);

WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < (SELECT rows FROM conf))
INSERT INTO item(name, grp, price, note)
SELECT 'item-' || i, i % 97, (i * 7919) % 10007 / 100.0, substr(hex(i * 2654435761) || hex(i * 40503) || hex(i * 977), 1, 16 + i % 64) FROM seq;

CREATE INDEX item_grp ON item(grp, price);
CREATE INDEX item_name ON item(name);

SELECT grp, count(*), round(avg(price), 2), max(length(note)) FROM item GROUP BY grp ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM item a JOIN item b ON b.id = a.id + 1 WHERE a.grp = b.grp - 1;

UPDATE item SET note = note || '-updated', price = price * 1.1 WHERE grp % 3 = 0;
DELETE FROM item WHERE grp % 5 = 0;
SELECT count(*), round(sum(price), 2) FROM item;

SELECT name FROM item ORDER BY note DESC LIMIT 1;
