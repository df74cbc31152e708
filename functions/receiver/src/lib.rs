//! The receiver function as a library, so the end-to-end tests drive the exact handler and
//! service stack the binary runs.

pub mod handler;
pub mod heap;
mod run;
pub mod stack;
pub mod transport;
pub mod unreadable;

pub use run::main;
