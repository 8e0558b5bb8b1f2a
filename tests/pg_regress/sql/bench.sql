-- turboinfer_bench(): the built-in benchmark a DBA runs to see what this server does with the
-- configured model. Its figures depend on the machine, so only their names, units and sanity are
-- checked here: every metric present once, in order, with its unit; every value finite and
-- non-negative; the speeds, latencies and token counts of a real answer above zero. The smallest
-- model keeps it fast (its answer may be rejected: the benchmark measures the engine all the same).
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.threads = 1;

-- First call in this backend: the model is loaded by it ("cold load").
CREATE TEMP TABLE b1 AS SELECT row_number() OVER () AS n, * FROM turboinfer_bench();
SELECT n, metric, unit FROM b1 ORDER BY n;
SELECT metric FROM b1 WHERE NOT (value >= 0 AND value < 'Infinity'::float8);
SELECT metric, value > 0 AS positive FROM b1
WHERE metric IN ('prefill', 'decode', 'nl2sql_cold', 'nl2sql_warm', 'warm_prefill_tokens',
                 'generated_tokens', 'backend_rss', 'model_load')
ORDER BY n;
-- The threads it ran with are the setting's; smollm2-135m has no Q4_K/Q6_K matrix to pack.
SELECT value FROM b1 WHERE metric = 'threads';
SELECT value FROM b1 WHERE metric = 'packed_matrices';

-- Second call: the model is already loaded; the same metrics and units otherwise.
CREATE TEMP TABLE b2 AS SELECT row_number() OVER () AS n, * FROM turboinfer_bench();
SELECT unit FROM b2 WHERE metric = 'model_load';
SELECT b1.metric FROM b1 FULL JOIN b2 USING (n)
WHERE b1.metric IS DISTINCT FROM b2.metric
   OR (b1.unit IS DISTINCT FROM b2.unit AND b1.metric <> 'model_load');

-- Any role may run it (SECURITY INVOKER, EXECUTE granted to PUBLIC).
CREATE ROLE bench_reader;
SET ROLE bench_reader;
SELECT count(*) AS metrics FROM turboinfer_bench();
RESET ROLE;
DROP ROLE bench_reader;

-- A model that is not installed is an ERROR with its SQLSTATE, and the session carries on.
SET turboinfer.model = 'no-such-model';
\set VERBOSITY sqlstate
SELECT * FROM turboinfer_bench();
\set VERBOSITY default
RESET turboinfer.model;
SELECT 1 AS still_here;

DROP EXTENSION turboinfer;
