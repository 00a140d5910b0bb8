//! What waits to be sent on a connection, and the two rules every shell applies to it (the
//! native driver's queues and the wasm driver's socket alike): at `pause_bytes` its sources
//! wait ([`is_behind`]), and past `max_bytes` a link whose client reads nothing is closed
//! ([`Overflow`]). `outbound` in the device's config sets both.

/// Whether a queue holding `queued` bytes is behind its `pause_bytes` mark: its sources wait
/// until it drains under it.
pub fn is_behind(queued: usize, pause_bytes: usize) -> bool {
    queued >= pause_bytes
}

/// A connection's queue would pass its bound: the connection must close (1008).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    pub queued: usize,
    pub max: usize,
}

impl Overflow {
    /// Whether a frame of `frame` bytes may join `queued` under `max` bytes. One frame always
    /// fits an empty queue, so a frame under the frame limit is never refused on its own.
    pub fn check(queued: usize, frame: usize, max: usize) -> Result<(), Overflow> {
        if queued > 0 && queued + frame > max {
            return Err(Overflow {
                queued: queued + frame,
                max,
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for Overflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the client is not reading: {} bytes wait to be sent, over the bound of {} \
             (outbound.max_bytes)",
            self.queued, self.max
        )
    }
}

/// The close code of a link closed for [`Overflow`]: policy violation.
pub const CLOSE_OVERFLOW: u16 = 1008;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_mark_is_inclusive_and_the_bound_lets_one_frame_into_an_empty_queue() {
        assert!(!is_behind(99, 100));
        assert!(is_behind(100, 100));
        assert_eq!(Overflow::check(0, 500, 100), Ok(()));
        assert_eq!(Overflow::check(60, 40, 100), Ok(()));
        let over = Overflow::check(60, 50, 100).unwrap_err();
        assert_eq!(
            over,
            Overflow {
                queued: 110,
                max: 100
            }
        );
        assert!(over
            .to_string()
            .contains("over the bound of 100 (outbound.max_bytes)"));
    }
}
