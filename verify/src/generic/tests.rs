//! The generic scheme's tests, by concept: the configuration and its template, verification and
//! signing, and properties over arbitrary input; the vectors they share in [`fixtures`].

mod config;
mod fixtures;
mod properties;
mod verify;
