-- TurboInfer 0.3.0 -> 0.4.0. Run by ALTER EXTENSION turboinfer UPDATE (TO '0.4.0') once the 0.4.0
-- library and scripts are installed. 0.4.0 builds for PostgreSQL 14 to 18 (one library per major,
-- the same SQL objects on each): it adds, drops and changes no SQL object of 0.3.0, so this script
-- only moves the extension's version. scripts/test-install.sh checks, on each tested major, that
-- an updated database and a fresh CREATE EXTENSION turboinfer have the same objects.
\echo Use "ALTER EXTENSION turboinfer UPDATE TO '0.4.0'" to load this file. \quit
