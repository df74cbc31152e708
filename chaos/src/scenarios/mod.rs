//! The scenarios, one file each.
