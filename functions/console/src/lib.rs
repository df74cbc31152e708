//! The console function as a library, so the tests drive the exact handler the binary runs
//! through the same service stack.

pub mod handler;
mod run;

pub use run::main;
