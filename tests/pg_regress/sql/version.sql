-- turboinfer_version(): the crate version, semver-shaped, equal to the installed extension version.
CREATE EXTENSION turboinfer;

SELECT turboinfer_version() ~ '^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$' AS semver_shape;

SELECT turboinfer_version() = extversion AS equals_extversion
FROM pg_extension WHERE extname = 'turboinfer';

SELECT pg_typeof(turboinfer_version()) AS type;

-- Attributes of the informational functions: volatility, strictness, parallel safety.
SELECT p.proname, p.provolatile, p.proisstrict, p.proparallel, pg_get_function_result(p.oid) AS result
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'turboinfer'
WHERE p.proname IN ('turboinfer_version', 'turboinfer_cpu_features')
ORDER BY p.proname;

-- The extension is not relocatable and needs a superuser.
SELECT name, relocatable, superuser, trusted FROM pg_available_extension_versions
WHERE name = 'turboinfer' AND version = turboinfer_version();

DROP EXTENSION turboinfer;
