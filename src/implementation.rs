//! The design notes (`docs/design.md`), rendered here so that they travel with the API docs.
#![doc = include_str!("../docs/design.md")]
