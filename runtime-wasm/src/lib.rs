//! The wasm shell of the LLeMbas link core (the drivers come next): for now the plain-object
//! shapes that cross to JS ([`json`]) and the JS side of the boundary ([`js`]), shared with
//! `bindings`, which wraps them in its exported classes. Nothing here is exported to JS.

pub mod js;
pub mod json;
