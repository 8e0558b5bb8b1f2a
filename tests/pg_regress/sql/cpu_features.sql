-- turboinfer_cpu_features(): shape and internal consistency, not this machine's answer.
CREATE EXTENSION turboinfer;

-- Column names and types.
SELECT pg_get_function_result('turboinfer_cpu_features'::regproc) AS result_type;

-- Types of the returned values.
SELECT DISTINCT pg_typeof(feature) AS feature_type, pg_typeof(detected) AS detected_type
FROM turboinfer_cpu_features();

-- At least one feature, every name a lowercase identifier, no duplicates, no NULLs.
SELECT count(*) > 0 AS has_rows,
       count(*) = count(DISTINCT feature) AS no_duplicates,
       bool_and(feature ~ '^[a-z][a-z0-9]*$') AS names_lowercase,
       count(*) FILTER (WHERE detected IS NULL) AS null_detected
FROM turboinfer_cpu_features();

-- A feature of the base SIMD set of the server's architecture is listed (x86-64 or aarch64).
SELECT bool_or(feature IN ('avx2', 'neon')) AS knows_base_simd
FROM turboinfer_cpu_features();

-- Sub-extensions never appear without their base extension.
SELECT count(*) AS implication_violations
FROM turboinfer_cpu_features() sub
WHERE sub.detected
  AND sub.feature IN ('avx512bw', 'avx512vl', 'avx512vnni', 'dotprod', 'i8mm')
  AND NOT EXISTS (
      SELECT 1 FROM turboinfer_cpu_features() base
      WHERE base.detected
        AND base.feature = CASE WHEN sub.feature LIKE 'avx512%' THEN 'avx512f' ELSE 'neon' END);

-- The answer is stable: two calls agree row for row.
SELECT count(*) AS differences FROM (
    (SELECT * FROM turboinfer_cpu_features() EXCEPT ALL SELECT * FROM turboinfer_cpu_features())
    UNION ALL
    (SELECT * FROM turboinfer_cpu_features() EXCEPT ALL SELECT * FROM turboinfer_cpu_features())
) d;

-- The set-returning function also works in a lateral join.
SELECT count(*) = (SELECT count(*) FROM turboinfer_cpu_features()) AS lateral_ok
FROM (VALUES (1)) v(x), LATERAL turboinfer_cpu_features();

DROP EXTENSION turboinfer;
