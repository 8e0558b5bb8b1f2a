-- TurboInfer 0.3.0 -> 0.4.0. Run by ALTER EXTENSION turboinfer UPDATE (TO '0.4.0') once the 0.4.0
-- library and scripts are installed. 0.4.0 builds for PostgreSQL 14 to 18 (one library per major,
-- the same SQL objects on each). Its SQL changes: nl2sql, nl2sql_run and nl2sql_explain take a
-- `follow_up` argument, nl2sql_converse is new, and an event trigger clears dropped relations from
-- the approved examples (below). scripts/test-install.sh checks, on each tested major, that an
-- updated database and a fresh CREATE EXTENSION turboinfer have the same objects.
\echo Use "ALTER EXTENSION turboinfer UPDATE TO '0.4.0'" to load this file. \quit

-- Follow-up questions (issue #62, src/pg/conversation.rs): nl2sql, nl2sql_run and nl2sql_explain
-- take `follow_up boolean DEFAULT false` as their last argument. A function's arguments cannot
-- change in place: each old one is renamed, the new one created as pgrx generates it for 0.4.0,
-- the old one's privileges carried over to it (below), and the old one dropped (a view or
-- function that called the old one by its old signature must be recreated: none of the
-- extension's own objects does). Calls written as before mean what they meant.
ALTER FUNCTION "nl2sql"(TEXT) RENAME TO "nl2sql_until_0_3_0";
CREATE  FUNCTION "nl2sql"(
	"question" TEXT, /* Text */
	"follow_up" bool DEFAULT false /* bool */
) RETURNS TEXT /* TextOut */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_wrapper';

ALTER FUNCTION "nl2sql_run"(TEXT, INT) RENAME TO "nl2sql_run_until_0_3_0";
CREATE  FUNCTION "nl2sql_run"(
	"question" TEXT, /* Text */
	"row_limit" INT DEFAULT 100, /* i32 */
	"follow_up" bool DEFAULT false /* bool */
) RETURNS SETOF jsonb /* JsonbText */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_run_wrapper';

ALTER FUNCTION "nl2sql_explain"(TEXT, TEXT[], double precision) RENAME TO "nl2sql_explain_until_0_3_0";
CREATE  FUNCTION "nl2sql_explain"(
	"question" TEXT, /* Option < Text > */
	"schemas" TEXT[] DEFAULT NULL, /* Option < TextArray > */
	"sparsity" double precision DEFAULT NULL, /* Option < f64 > */
	"follow_up" bool DEFAULT false /* Option < bool > */
) RETURNS jsonb /* Option < Jsonb > */
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_explain_sparse_wrapper';

-- A DBA's GRANT or REVOKE on an old signature carries over to the new one: where the old
-- function had privileges of its own (proacl not NULL; NULL is the default, EXECUTE to PUBLIC,
-- which the new one has too), the new one gets exactly those (PUBLIC revoked first, so a REVOKE
-- from PUBLIC stays a REVOKE). Granted inside an extension script, privileges are recorded as the
-- extension's initial ones (pg_init_privs), which pg_dump leaves out; those rows are removed so
-- that pg_dump dumps them as the DBA's, as it did before the update.
DO $$
DECLARE
    p record;
    a record;
BEGIN
    FOR p IN
        SELECT o.proacl, v.new
          FROM (VALUES ('@extschema@.nl2sql_until_0_3_0(text)'::pg_catalog.regprocedure,
                        '@extschema@.nl2sql(text, boolean)'::pg_catalog.regprocedure),
                       ('@extschema@.nl2sql_run_until_0_3_0(text, integer)'::pg_catalog.regprocedure,
                        '@extschema@.nl2sql_run(text, integer, boolean)'::pg_catalog.regprocedure),
                       ('@extschema@.nl2sql_explain_until_0_3_0(text, text[], double precision)'::pg_catalog.regprocedure,
                        '@extschema@.nl2sql_explain(text, text[], double precision, boolean)'::pg_catalog.regprocedure)) AS v(old, new)
          JOIN pg_catalog.pg_proc o ON o.oid OPERATOR(pg_catalog.=) v.old
         WHERE o.proacl IS NOT NULL
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', p.new);
        FOR a IN SELECT * FROM pg_catalog.aclexplode(p.proacl) LOOP
            EXECUTE pg_catalog.format('GRANT %s ON FUNCTION %s TO %s%s', a.privilege_type, p.new,
                CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
                CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.objoid OPERATOR(pg_catalog.=) p.new
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    END LOOP;
END
$$;
DROP FUNCTION "nl2sql_until_0_3_0"(TEXT);
DROP FUNCTION "nl2sql_run_until_0_3_0"(TEXT, INT);
DROP FUNCTION "nl2sql_explain_until_0_3_0"(TEXT, TEXT[], double precision);

-- Conversations carried by the client (issue #80, src/pg/conversation.rs): a follow-up names the
-- conversation it continues with the token returned with the previous answer, so that clients
-- sharing a backend through a pooler never see each other's turns.
CREATE  FUNCTION "nl2sql_converse"(
	"question" TEXT, /* Option < Text > */
	"previous" TEXT DEFAULT NULL /* Option < Text > */
) RETURNS TABLE (
	"sql" TEXT,  /* TextOut */
	"conversation" TEXT,  /* String */
	"follow_up" jsonb  /* Jsonb */
)
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_converse_wrapper';

-- Approved examples over dropped relations (issue #80, src/pg/examples.rs): the event trigger
-- below clears a dropped relation's OID from "relations" from now on; the examples stored over
-- relations dropped before this update are cleared the same way here, once.
-- A dropped relation leaves no OID behind in "relations": it becomes 0 (shown as '-'), so the
-- examples over it stay hidden from everyone, also where a new relation later takes that OID
-- (pg_dump writes a dropped relation's OID as a number, which pg_restore may give to another
-- table; OIDs also wrap around). SECURITY DEFINER (the extension's owner, a superuser): the role
-- that drops a table need not be allowed to change the store. Read first: a DROP that no
-- example names (nearly all) writes nothing and locks no row of the store.
CREATE FUNCTION nl2sql_examples_forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone oid[];
BEGIN
    SELECT pg_catalog.array_agg(d.objid) INTO gone
      FROM pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objsubid OPERATOR(pg_catalog.=) 0;
    IF gone IS NULL OR NOT EXISTS (SELECT FROM @extschema@.nl2sql_examples e
                                    WHERE e.relations::pg_catalog.oid[] OPERATOR(pg_catalog.&&) gone) THEN
        RETURN;
    END IF;
    UPDATE @extschema@.nl2sql_examples e
       SET relations = ARRAY(SELECT (CASE WHEN r.oid OPERATOR(pg_catalog.=) ANY (gone) THEN 0 ELSE r.oid END)::pg_catalog.regclass
                               FROM pg_catalog.unnest(e.relations::pg_catalog.oid[]) WITH ORDINALITY AS r(oid, n)
                              ORDER BY r.n)
     WHERE e.relations::pg_catalog.oid[] OPERATOR(pg_catalog.&&) gone;
END
$$;
REVOKE ALL ON FUNCTION nl2sql_examples_forget_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER turboinfer_examples_dropped ON sql_drop
    EXECUTE FUNCTION nl2sql_examples_forget_dropped();
UPDATE @extschema@.nl2sql_examples e
   SET relations = ARRAY(SELECT (CASE WHEN c.oid IS NULL THEN 0 ELSE r.oid END)::pg_catalog.regclass
                           FROM pg_catalog.unnest(e.relations::pg_catalog.oid[]) WITH ORDINALITY AS r(oid, n)
                           LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.oid
                          ORDER BY r.n)
 WHERE EXISTS (SELECT FROM pg_catalog.unnest(e.relations::pg_catalog.oid[]) AS r(oid)
                WHERE r.oid OPERATOR(pg_catalog.<>) 0
                  AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) r.oid));
