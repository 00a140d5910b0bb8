//! Following sessions by seq (our extension, capability `events`): the client remembers, per
//! session it heard of, the last `_meta.lembas.seq` it handed its UI. On a new link it asks
//! `_lembas/session/events` for what came after, page by page, and hands the missed events out
//! in order, as live ones; live events heard meanwhile are held and handed out after them. A
//! seq already handed out is dropped, live or fetched, so the UI neither misses nor repeats
//! one. Where the log no longer reaches back (`truncated`), the pages run out, or the device
//! cannot say, a [`ClientEvent::Gap`] tells the UI to import `history` instead.
//!
//! Requests (cards) are not in this: a card still open is put again on the new link, with the
//! seq of its first offer, and must be answerable there; one fetched from the log is not.

use serde_json::{json, Value};

use super::turns::Purpose;
use super::{Client, ClientEvent};
use crate::jsonrpc::RpcError;
use crate::methods::{self, Kind};

/// A session followed by seq.
#[derive(Debug, Default)]
struct Followed {
    session: String,
    /// The last seq handed out.
    last: u64,
    /// When it was last heard of (a count of events), so the oldest is forgotten first.
    heard: u64,
    catch_up: Option<CatchUp>,
}

/// A session catching up on a new link.
#[derive(Debug, Default)]
struct CatchUp {
    pages: u32,
    /// Live events heard meanwhile, in arrival order, and answers about the session.
    held: Vec<Held>,
    /// The highest live seq not held (the bound was reached): fetched with a later page.
    not_held: u64,
}

#[derive(Debug)]
enum Held {
    Heard {
        seq: u64,
        method: String,
        params: Value,
    },
    Said(ClientEvent),
}

/// Few (`followed_sessions`), so a list: a map's code would cost the web client's module more.
#[derive(Debug, Default)]
pub(super) struct Resume {
    sessions: Vec<Followed>,
    heard: u64,
    /// Held events over all sessions.
    held: usize,
}

impl Resume {
    fn get(&mut self, session: &str) -> Option<&mut Followed> {
        self.sessions.iter_mut().find(|f| f.session == session)
    }
}

/// The session and seq of an event that carries one.
pub(super) fn sequenced(params: &Value) -> Option<(&str, u64)> {
    let seq = params["_meta"]["lembas"]["seq"].as_u64()?;
    Some((params["sessionId"].as_str()?, seq))
}

impl Client {
    /// A live event with a seq: handed out, held while its session catches up, or dropped as
    /// seen.
    pub(super) fn on_sequenced(
        &mut self,
        session: String,
        seq: u64,
        method: String,
        params: Value,
    ) {
        self.follow(&session);
        let r = &mut self.resume;
        let Some(f) = r.sessions.iter_mut().find(|f| f.session == session) else {
            return;
        };
        if seq <= f.last {
            return;
        }
        if let Some(c) = &mut f.catch_up {
            if r.held < self.config.held_events {
                r.held += 1;
                c.held.push(Held::Heard {
                    seq,
                    method,
                    params,
                });
            } else {
                c.not_held = c.not_held.max(seq);
            }
            return;
        }
        f.last = seq;
        self.hand_out(method, params);
    }

    /// Remember `session` as heard of now, forgetting the one heard of longest ago past the
    /// bound. A session the client prompts is followed from then, before any of its events is
    /// heard: a link cut before the first of them still catches up on them (from seq 0).
    pub(super) fn follow(&mut self, session: &str) {
        let r = &mut self.resume;
        r.heard += 1;
        let heard = r.heard;
        if let Some(f) = r.get(session) {
            f.heard = heard;
            return;
        }
        if r.sessions.len() >= self.config.followed_sessions {
            let oldest = r
                .sessions
                .iter()
                .min_by_key(|f| f.heard)
                .map(|f| f.session.clone());
            if let Some(oldest) = oldest {
                self.unfollow(&oldest);
            }
        }
        self.resume.sessions.push(Followed {
            session: session.to_string(),
            heard,
            ..Followed::default()
        });
    }

    /// Tell the UI `event` about `session`: after the missed events, if it is catching up.
    pub(super) fn emit_about(&mut self, session: &str, event: ClientEvent) {
        let r = &mut self.resume;
        let followed = r.sessions.iter_mut().find(|f| f.session == session);
        match followed.and_then(|f| f.catch_up.as_mut()) {
            Some(c) if r.held < self.config.held_events => {
                r.held += 1;
                c.held.push(Held::Said(event));
            }
            // Out of order rather than lost.
            _ => self.emit(event),
        }
    }

    /// A new link is ready: every followed session asks for what it missed. A session still
    /// catching up when its link dropped keeps what it held: it comes after what is fetched.
    pub(super) fn catch_up_all(&mut self) {
        for i in 0..self.resume.sessions.len() {
            let f = &mut self.resume.sessions[i];
            f.catch_up.get_or_insert_with(CatchUp::default).pages = 0;
            let session = f.session.clone();
            self.ask_events(&session);
        }
    }

    fn ask_events(&mut self, session: &str) {
        let Some(f) = self.resume.get(session) else {
            return;
        };
        let since = f.last;
        if let Some(c) = &mut f.catch_up {
            c.pages += 1;
        }
        let params = json!({ "sessionId": session, "since": since });
        match self.call("_lembas/session/events", &params, self.clock.now()) {
            Ok(id) => {
                self.purposes
                    .insert(id, Purpose::Events(session.to_string()));
            }
            // A device without `events`: what was missed cannot be had.
            Err(_) => self.finish_catch_up(session, true),
        }
    }

    /// A page of missed events: hand them out, then ask for the next or follow live.
    pub(super) fn on_events_page(&mut self, session: String, outcome: Result<Value, RpcError>) {
        let Some(last) = self.resume.get(&session).map(|f| f.last) else {
            return;
        };
        let Ok(mut page) = outcome else {
            return self.finish_catch_up(&session, true);
        };
        if page["truncated"] == json!(true) {
            self.emit(ClientEvent::Gap {
                session_id: session.clone(),
                since: last,
            });
        }
        let events = match page["events"].take() {
            Value::Array(events) => events,
            _ => Vec::new(),
        };
        let fetched = !events.is_empty();
        for mut e in events {
            let (Some(seq), Value::String(method), params) =
                (e["seq"].as_u64(), e["method"].take(), e["params"].take())
            else {
                continue;
            };
            let notice = methods::find(&method).is_some_and(|m| m.kind == Kind::Notification);
            let Some(f) = self.resume.get(&session) else {
                return;
            };
            if notice && seq > f.last {
                f.last = seq;
                self.hand_out(method, params);
            }
        }
        let Some(f) = self.resume.get(&session) else {
            return;
        };
        let Some(c) = &f.catch_up else { return };
        let first_held = c.held.iter().find_map(|h| match h {
            Held::Heard { seq, .. } => Some(*seq),
            Held::Said(_) => None,
        });
        let reached_live = c.not_held <= f.last && first_held.is_some_and(|s| s <= f.last + 1);
        if !fetched || reached_live {
            self.finish_catch_up(&session, false);
        } else if c.pages >= self.config.catch_up_pages {
            self.finish_catch_up(&session, true);
        } else {
            self.ask_events(&session);
        }
    }

    /// Stop catching up: hand out what was held (a seq not yet handed out, in order), after a
    /// gap if what was missed could not all be had.
    fn finish_catch_up(&mut self, session: &str, gap: bool) {
        let Some(f) = self.resume.get(session) else {
            return;
        };
        let Some(c) = f.catch_up.take() else { return };
        if gap {
            let since = f.last;
            self.emit(ClientEvent::Gap {
                session_id: session.to_string(),
                since,
            });
        }
        self.release(session, c.held);
    }

    fn release(&mut self, session: &str, held: Vec<Held>) {
        self.resume.held -= held.len();
        for h in held {
            match h {
                Held::Heard {
                    seq,
                    method,
                    params,
                } => {
                    let Some(f) = self.resume.get(session) else {
                        return;
                    };
                    if seq > f.last {
                        f.last = seq;
                        self.hand_out(method, params);
                    }
                }
                Held::Said(event) => self.emit(event),
            }
        }
    }

    /// A session deleted is followed no more.
    pub(super) fn unfollow(&mut self, session: &str) {
        self.finish_catch_up(session, false);
        self.resume.sessions.retain(|f| f.session != session);
    }
}
