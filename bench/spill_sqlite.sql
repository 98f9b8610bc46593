-- sqlite3 with a large cache and cold data, for bench/spill_workload.sh.
--
-- A database file whose every page sits in sqlite's page cache (allocated
-- with malloc, so in the heap): a table of @rows records of about 200
-- bytes (a serial number, words, a pseudo-random hex tail, as in
-- bench/spill_dict.py), of which only the rows with id < @hot (the first
-- fifth inserted) are read in the working phase: @ops lookups by rowid
-- spread over them by a multiplicative hash, and an update of one in four
-- of the rows looked up.  The other pages of the cache are never read again
-- until the checksum at the end.  Deterministic: every run ends with the
-- same checksum.
--
-- The counter n starts at 1000, not 0, so that an update leaves a record
-- its size: sqlite stores 0 and 1 in the record's type byte alone and 2
-- in one byte more.  From 0, the second update of the working phase grew
-- each of its records, split pages, and at its commit sqlite 3.40's pager
-- walked every page of its cache (perf: pcache1's truncation loop): that
-- statement referenced 180 MB of the 190 MB resident, against 39-44 MB for
-- each of the others (/proc/PID/clear_refs, then Referenced in
-- smaps_rollup), so the "cold" four fifths were all read once in the
-- working phase.  From 1000 each statement references 41-44 MB.
--
-- The driver sets @rows, @hot and @ops with `.parameter set`, then feeds
-- this file a section at a time: up to each `.print` marker, waiting for
-- the marker before it goes on (`ready`, `built`, `done`, `end`).  The
-- working phase is timed by the shell's `.timer`, statement by statement;
-- `half` separates its two halves.

PRAGMA page_size = 4096;
PRAGMA cache_size = -2000000;		-- KiB: larger than the database
PRAGMA locking_mode = EXCLUSIVE;	-- the cache stays valid between statements
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
.print ready

CREATE TEMP TABLE w(id INTEGER PRIMARY KEY, s TEXT);
INSERT INTO w(s) VALUES ('memory'), ('cgroup'), ('page'), ('cold'), ('hot'), ('reclaim'),
	('spill'), ('python'), ('dict'), ('entry'), ('record'), ('value'), ('high'), ('limit'),
	('resident'), ('pool'), ('compress'), ('refault'), ('working'), ('set'), ('the'), ('of'),
	('and'), ('a'), ('to'), ('in'), ('is'), ('it'), ('that'), ('for');
-- 12,000 words drawn from w: the text the records take their words from,
-- a blob so that substr() finds an offset without counting characters.
CREATE TEMP TABLE txt AS
WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 11999)
SELECT CAST(group_concat(w.s, ' ') AS BLOB) AS s FROM k JOIN w ON w.id = 1 + (k.i * 1103515245 + 12345) / 65536 % 30;

CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, v TEXT NOT NULL);
WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < @rows - 1)
INSERT INTO t
SELECT i, 1000, printf('%09d|%s|%08x%08x%08x%08x', i, CAST(substr(txt.s, 1 + i * 7919 % (length(txt.s) - 200), 160) AS TEXT),
		    (i * 1103515245 + 12345) % 4294967296, (i * 22695477 + 1) % 4294967296,
		    (i * 134775813 + 1) % 4294967296, (i * 69069 + 1) % 4294967296)
FROM r, txt;
.print built

.timer on
WITH RECURSIVE r(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM r WHERE j < @ops / 2 - 1)
SELECT sum(length(t.v)) FROM r JOIN t ON t.id = r.j * 2654435761 % @hot;
WITH RECURSIVE r(j) AS (SELECT 0 UNION ALL SELECT j + 4 FROM r WHERE j < @ops / 2 - 4)
UPDATE t SET n = n + 1 WHERE id IN (SELECT j * 2654435761 % @hot FROM r);
.timer off
.print half
.timer on
WITH RECURSIVE r(j) AS (SELECT @ops / 2 UNION ALL SELECT j + 1 FROM r WHERE j < @ops - 1)
SELECT sum(length(t.v)) FROM r JOIN t ON t.id = r.j * 2654435761 % @hot;
WITH RECURSIVE r(j) AS (SELECT @ops / 2 UNION ALL SELECT j + 4 FROM r WHERE j < @ops - 4)
UPDATE t SET n = n + 1 WHERE id IN (SELECT j * 2654435761 % @hot FROM r);
.timer off
.print done

SELECT 'rows ' || count(*) || ' updates ' || sum(n) FROM t;
SELECT 'checksum ' || hex(sha3_query('SELECT id, n, v FROM t ORDER BY id'));
.print end
.quit
