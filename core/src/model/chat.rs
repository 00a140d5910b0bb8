//! The chat completions request body and its streamed chunks (OpenAI-compatible).
