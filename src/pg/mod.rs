//! PostgreSQL glue: the only module that may use `pgrx`. Each function here is a thin wrapper that
//! calls the pure-Rust engine and turns its errors into `ereport`s.

mod functions;

// The magic block tells the server which PostgreSQL major version this library was built for.
::pgrx::pg_module_magic!(name, version);
