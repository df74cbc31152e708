//! The auditor function as a library, so the tests drive the exact handler the binary runs.

pub mod handler;
mod run;

pub use run::main;
