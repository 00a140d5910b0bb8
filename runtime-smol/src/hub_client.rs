//! `lembas sessions` while the service runs: the service owns the store, so the sessions are
//! listed and deleted through its hub (`session/list`, `session/delete`), and a delete reaches
//! the web at once (`_lembas/session/deleted` on the link) instead of waiting for the store.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::sessions::Row;

/// How long an answer is waited for: the service answers these at once, so a silent one is
/// stuck, and the person is told rather than left waiting.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// A hub connection past `initialize`, speaking one request at a time.
pub struct HubClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl HubClient {
    pub fn new(stream: UnixStream) -> Result<HubClient, String> {
        stream
            .set_read_timeout(Some(ANSWER_WITHIN))
            .map_err(|e| e.to_string())?;
        let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let mut c = HubClient {
            reader,
            writer: stream,
            next_id: 0,
        };
        c.call(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        )?;
        Ok(c)
    }

    /// One request and its result; an error answer is the service's message.
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.writer, "{frame}").map_err(|e| format!("the lembas service: {e}"))?;
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => return Err("the lembas service closed the hub connection".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("the lembas service did not answer: {e}")),
            }
            let Ok(m) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if m.get("method").is_some() || m["id"] != json!(id) {
                continue;
            }
            if let Some(e) = m.get("error") {
                return Err(e["message"].as_str().unwrap_or("an error").to_string());
            }
            return Ok(m["result"].clone());
        }
    }

    /// Every session the service has, most recently touched first.
    pub fn list(&mut self) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = self.call("session/list", params)?;
            for s in page["sessions"].as_array().into_iter().flatten() {
                rows.push(Row {
                    id: s["sessionId"].as_str().unwrap_or_default().to_string(),
                    title: s["title"].as_str().map(str::to_string),
                    cwd: s["cwd"].as_str().unwrap_or_default().to_string(),
                    touched: s["updatedAt"].as_str().and_then(millis_of).unwrap_or(0),
                });
            }
            match page["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return Ok(rows),
            }
        }
    }

    /// Delete one session (as `lembas sessions delete` does on the store).
    pub fn delete(&mut self, id: &str) -> Result<(), String> {
        self.call("session/delete", json!({ "sessionId": id }))
            .map(|_| ())
    }
}

/// Milliseconds since the Unix epoch of `2026-11-30T11:32:05.123Z` (what the core writes).
fn millis_of(iso: &str) -> Option<u64> {
    let (date, time) = iso.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, ms) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<u64>().ok());
    let (h, min, s) = (t.next()??, t.next()??, t.next()??);
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    Some((days * 86_400 + h * 3600 + min * 60 + s) * 1000 + ms.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cores_times_read_back_to_their_milliseconds() {
        for ms in [0, 951_782_400_005, 1_796_038_385_123, 4_102_444_799_999] {
            assert_eq!(millis_of(&lembas_core::time::iso8601(ms)), Some(ms));
        }
        assert_eq!(millis_of("yesterday"), None);
    }
}
