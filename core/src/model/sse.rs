//! A server-sent events parser: bytes in any split, events out, every bound named.
