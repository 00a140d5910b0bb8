//! Gherkin scenarios of the protocol's promises: see `features/*.feature` and `tests/features.rs`.
