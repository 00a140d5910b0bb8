//! Talking to the instance's models (issue #14): the model list (`/v1/models`), the chat
//! completions request and its server-sent events, and the engine that runs a turn on them.
//! All sans-IO: the shell performs the HTTP the engine asks for and feeds the bytes back.

pub mod chat;
pub mod effort;
pub mod engine;
pub mod models;
pub mod policy;
pub mod prompt;
pub mod sse;
pub mod tools;
