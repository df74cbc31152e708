//! The operator CLI (`hookledger`) run as an operator runs it: a built binary
//! (`hookledger-examples`: hookledger's CLI with the example handlers, `tests/src/bin/`), a
//! database at `DATABASE_URL` and the sources in a file. Needs PostgreSQL (`make test` starts
//! one).

mod console;
mod forget;
mod inspect_sealed;
mod operator;
mod replay;
mod sweep;
