//! The migrate function as a library, so the tests drive the exact handler the binary runs: the
//! translation of an invocation ([`handler`]), the `Schema` resource's answer to one
//! CloudFormation request ([`resource`]), the database on deploy (migrations, the functions'
//! logins, the connection budget: [`schema`]) and the custom resource protocol
//! ([`custom_resource`]). Deploy-time code lives here, not in `shared`, so the other functions
//! and the user's crate do not compile it.
#![warn(missing_docs)]

pub mod custom_resource;
pub mod handler;
pub mod resource;
mod run;
pub mod schema;

pub use run::main;
