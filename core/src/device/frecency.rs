//! The files a person used lately (attached by an `@path` mention), kept for the `@` picker:
//! each with how often and when last, bounded (`files.max_recent`; past it the least useful
//! is forgotten), and durable as one record of the store's device table ([`KEY`]). A file's
//! score is its uses, halved for every week since the last one, so a file used once today
//! passes one used four times a month ago.

use serde::{Deserialize, Serialize};

use crate::paths;
use crate::store::{Record, Table};

/// The key of the record in the store's device table.
pub const KEY: &str = "frecency";

const WEEK_MS: u64 = 7 * 24 * 60 * 60 * 1000;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Frecency {
    /// `(absolute path, uses, last use in ms)`.
    entries: Vec<(String, u32, u64)>,
}

impl Frecency {
    /// Read back from the store's record; `None` when it is not one.
    pub fn from_record(value: &str) -> Option<Frecency> {
        serde_json::from_str(value).ok()
    }

    fn score(uses: u32, last: u64, now: u64) -> f64 {
        let weeks = now.saturating_sub(last) as f64 / WEEK_MS as f64;
        f64::from(uses) * 0.5f64.powf(weeks)
    }

    /// `path` (absolute, real) was used at `now`; past `max` entries the lowest scored one
    /// goes. The record that keeps it.
    pub fn used(&mut self, path: &str, now: u64, max: usize) -> Record {
        match self.entries.iter_mut().find(|(p, _, _)| p == path) {
            Some(e) => {
                e.1 = e.1.saturating_add(1);
                e.2 = e.2.max(now);
            }
            None => self.entries.push((path.to_string(), 1, now)),
        }
        while self.entries.len() > max {
            let worst = self
                .entries
                .iter()
                .enumerate()
                .min_by(|(_, a), (_, b)| {
                    Self::score(a.1, a.2, now).total_cmp(&Self::score(b.1, b.2, now))
                })
                .map(|(i, _)| i);
            if let Some(i) = worst {
                self.entries.swap_remove(i);
            }
        }
        Record::Put {
            table: Table::Device,
            key: KEY.into(),
            value: serde_json::to_string(self).expect("frecency serializes"),
        }
    }

    /// The recent files under `root`, relative to it, best first, at most `n`.
    pub fn under(&self, root: &str, now: u64, n: usize) -> Vec<String> {
        let prefix = format!("{}/", root.trim_end_matches('/'));
        let mut found: Vec<(f64, String)> = self
            .entries
            .iter()
            .filter(|(p, _, _)| paths::inside(p, root) && p.len() > prefix.len())
            .filter_map(|(p, uses, last)| {
                let rel = p.strip_prefix(&prefix)?;
                Some((Self::score(*uses, *last, now), rel.to_string()))
            })
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        found.into_iter().take(n).map(|(_, p)| p).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_and_frequent_come_first_and_the_list_is_bounded() {
        let mut f = Frecency::default();
        let day = 24 * 60 * 60 * 1000;
        for _ in 0..4 {
            let _ = f.used("/w/old.rs", 0, 3);
        }
        let _ = f.used("/w/new.rs", 30 * day, 3);
        let _ = f.used("/other/x.rs", 30 * day, 3);
        assert_eq!(f.under("/w", 30 * day, 10), ["new.rs", "old.rs"]);
        let _ = f.used("/w/a/b.rs", 30 * day, 3);
        assert_eq!(f.entries.len(), 3, "the oldest, least used went");
        assert_eq!(f.under("/w", 30 * day, 1), ["a/b.rs"]);
        let record = f.used("/w/a/b.rs", 31 * day, 3);
        let Record::Put { value, .. } = record else {
            panic!("a put")
        };
        assert_eq!(Frecency::from_record(&value), Some(f));
    }
}
