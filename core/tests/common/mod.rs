//! Helpers shared by the core's test files, one concern a module.

// Each test file uses its own part of these.
#![allow(dead_code)]

pub mod lone;
pub mod model;
