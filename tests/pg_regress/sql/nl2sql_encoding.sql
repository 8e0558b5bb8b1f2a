-- Databases whose encoding is not UTF-8 (issue 16, item 6): questions, identifiers, comments,
-- statistics values and the returned SQL are converted between the database encoding and the
-- engine's UTF-8 (no XX000 "datums converted to &str should be valid UTF-8"). In SQL_ASCII,
-- bytes above 127 are taken as UTF-8 (PostgreSQL's own rule); other bytes are ERROR 22021.
CREATE DATABASE turboinfer_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE turboinfer_sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c turboinfer_latin1
SET client_encoding = 'UTF8';
SHOW server_encoding;
CREATE EXTENSION turboinfer;
CREATE TABLE café (id integer PRIMARY KEY, prénom text NOT NULL);
COMMENT ON COLUMN café.prénom IS 'le prénom du client, déjà vérifié';
INSERT INTO café SELECT g, (ARRAY['Zoé', 'Loïc', 'Anaïs'])[g % 3 + 1] FROM generate_series(1, 99) g;
ANALYZE café;
-- Qwen2.5-Coder 0.5B: the smallest test model that answers these with SQL, on every CPU alike.
SET turboinfer.model = 'qwen2.5-coder-0.5b';
SET turboinfer.max_new_tokens = 48;
-- The answer comes back in the database encoding (and was validated in it).
SELECT nl2sql('how many rows are in café?');
SELECT nl2sql('combien de prénoms différents dans café ?', ARRAY['public']);
-- The model saw the identifiers, the comment and the values as written.
SELECT e->>'question' AS question, position('prénom' IN e->>'prompt') > 0 AS column_shown,
       position('déjà vérifié' IN e->>'prompt') > 0 AS comment_shown, position('Zoé' IN e->>'prompt') > 0 AS value_shown
FROM nl2sql_explain('quels prénoms ?') e;
-- The validator parses the statement in the database encoding; its catalog facts come back.
SELECT nl2sql_check('SELECT prénom FROM café') IS NULL AS valid;
SELECT nl2sql_check('SELECT prenom FROM café');
-- The server's own message reaches the extension through pgrx's lossy UTF-8 copy: the non-UTF-8
-- byte shows as '?', and the reason is still returned (not a 22021 about U+FFFD).
SELECT nl2sql_check('SELECT id FROM cafés');
SELECT nl2sql_check('SELECT prénoms FROM café');
-- A NULL schema name is a clear error (22004), not a panic.
SELECT nl2sql('combien ?', ARRAY[NULL]);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE café;
DROP EXTENSION turboinfer;
\c turboinfer_sql_ascii
SET client_encoding = 'SQL_ASCII';
SHOW server_encoding;
CREATE EXTENSION turboinfer;
CREATE TABLE café (id integer PRIMARY KEY, prénom text NOT NULL);
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 32;
-- UTF-8 text in a SQL_ASCII database works.
SELECT nl2sql('how many rows are in café?');
-- A byte that is not UTF-8 (here LATIN1's é) is refused with 22021, before any model work.
SELECT nl2sql(E'how many rows are in caf\xe9?');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE café;
DROP EXTENSION turboinfer;
\c turboinfer_regress
DROP DATABASE turboinfer_latin1;
DROP DATABASE turboinfer_sql_ascii;
