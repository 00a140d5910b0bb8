//! A session's history lives in the store (`Table::History`, one entry a turn), not in memory:
//! a session keeps only the few recent turns its next turn's model context is made of
//! ([`Recent`], bounded by `sessions.max_context_turns` and `max_context_bytes`), so its memory
//! does not grow with its age. `_lembas/session/history` reads the store through the shell
//! (`Effect::ReadHistory`, answered by [`Device::handle_history_read`]): the newest turns
//! before `before`, at most `limit`, within `sessions.history_bytes`, saying how many older
//! ones it left out.

use super::{ConnId, Device, Effect};
use crate::config::SessionLimits;
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::store::{self, Entry};
use crate::time::Time;
use crate::wire::session::{HistoryParams, HistoryResult, HistoryTurn};

/// The last turns of a session, as its next turn's context needs them (prompts and answers;
/// no reasoning, tools or attachments), oldest first; and the index its next turn is stored
/// under.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    turns: Vec<HistoryTurn>,
    next: u64,
}

impl Recent {
    /// From a session's stored history, `(index, turn)` in any order (the next index follows
    /// the newest); `failed` says which turn ids failed (their answers give the model nothing).
    pub fn restored(
        mut stored: Vec<(u64, HistoryTurn)>,
        failed: impl Fn(&str) -> bool,
        limits: &SessionLimits,
    ) -> Recent {
        stored.sort_by_key(|(i, _)| *i);
        // Indexes read back are within `store::HISTORY_INDEX_MAX`, one a key.
        let mut recent = Recent {
            next: stored.last().map_or(0, |(i, _)| i + 1),
            ..Recent::default()
        };
        let mut last_failed = false;
        for (_, turn) in &stored {
            if let HistoryTurn::User { turn_id, .. } = turn {
                last_failed = turn_id.as_deref().is_some_and(&failed);
            }
            recent.keep(turn, last_failed, limits);
        }
        recent
    }

    /// A turn stored now (`failed`: an answer whose turn failed): the index it is stored
    /// under.
    pub fn push(&mut self, turn: &HistoryTurn, failed: bool, limits: &SessionLimits) -> u64 {
        let index = self.next;
        self.next += 1;
        self.keep(turn, failed, limits);
        index
    }

    /// Leave out of the model's context the entries stored before index `folded` (a
    /// compaction's summary stands for them). The kept entries are the newest, one index each.
    pub fn fold_before(&mut self, folded: u64) {
        let first = self.next - self.turns.len() as u64;
        let gone = folded.saturating_sub(first).min(self.turns.len() as u64);
        self.turns.drain(..gone as usize);
    }

    /// The entries stored at index `from` and after are reverted (rewind.rs): they leave the
    /// model's context, and the next entry is stored at `from`, as a restart would count on
    /// from the store once they are deleted. The entries before `from` that the window had
    /// already let go stay gone until a restart reads the window afresh.
    pub fn revert_from(&mut self, from: u64) {
        if from >= self.next {
            return;
        }
        let first = self.next - self.turns.len() as u64;
        let kept = from.saturating_sub(first) as usize;
        self.turns.truncate(kept);
        self.next = from;
    }

    /// The index the next entry is stored under.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// Oldest first.
    pub fn turns(&self) -> &[HistoryTurn] {
        &self.turns
    }

    /// The index the next turn is stored under.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The turns stored at `index` and after, oldest first (as the context keeps them: no
    /// reasoning, tools or attachments), if it still keeps all of them.
    pub fn since(&self, index: u64) -> Option<&[HistoryTurn]> {
        let n = usize::try_from(self.next.checked_sub(index)?).ok()?;
        let from = self.turns.len().checked_sub(n)?;
        Some(&self.turns[from..])
    }

    /// Keep what a model's context takes of `turn` (a failed answer as none: a failure's
    /// partial text would mislead the model). Then the entries no later turn's context can
    /// take go: those before the last `max_context_turns` answered turns within
    /// `max_context_bytes` (`turns::prior_turns`' walk, whose window only moves on as turns
    /// are added), with every entry's text counted, so that prompts left unanswered bound it
    /// too; the prompt of a turn still running stays for its answer.
    fn keep(&mut self, turn: &HistoryTurn, failed: bool, limits: &SessionLimits) {
        let light = match turn {
            HistoryTurn::User { text, turn_id, .. } => HistoryTurn::User {
                text: text.clone(),
                turn_id: turn_id.clone(),
                attachments: Vec::new(),
            },
            HistoryTurn::Assistant { text, .. } => HistoryTurn::Assistant {
                text: if failed { String::new() } else { text.clone() },
                reasoning: String::new(),
                tools: Vec::new(),
            },
        };
        self.turns.push(light);
        let waiting = matches!(self.turns.last(), Some(HistoryTurn::User { .. }));
        let mut from = self.turns.len() - usize::from(waiting);
        let max_entries = limits.max_context_turns.saturating_mul(8);
        let (mut pairs, mut bytes, mut answer) = (0, 0usize, None);
        for (i, t) in self.turns.iter().enumerate().rev() {
            bytes = bytes.saturating_add(text_of(t).len());
            if pairs >= limits.max_context_turns
                || bytes > limits.max_context_bytes
                || self.turns.len() - i > max_entries
            {
                break;
            }
            match t {
                HistoryTurn::Assistant { text, .. } => answer = Some(!text.is_empty()),
                HistoryTurn::User { .. } => {
                    if answer.take() == Some(true) {
                        pairs += 1;
                        from = from.min(i);
                    }
                }
            }
        }
        self.turns.drain(..from);
    }
}

fn text_of(turn: &HistoryTurn) -> &str {
    match turn {
        HistoryTurn::User { text, .. } | HistoryTurn::Assistant { text, .. } => text,
    }
}

/// What a history read is for.
#[derive(Debug)]
pub(super) enum Purpose {
    /// `_lembas/session/history`, with what its answer says of the session as it was asked.
    Answer { title: Option<String>, root: String },
    /// `session/load`: the turns replayed to the editor before its answer (session_acp.rs):
    /// those stored before `upto`, the session's next history index when it was asked; this
    /// is read number `reads` of it.
    Replay { upto: u64, reads: u8 },
}

/// A request waiting for the shell to read a session's history.
#[derive(Debug)]
pub(super) struct PendingHistory {
    conn: ConnId,
    id: Id,
    session_id: String,
    limit: usize,
    max_bytes: usize,
    purpose: Purpose,
}

/// The turns a read answers: the newest that fit, oldest first.
pub(super) struct Selected {
    pub turns: Vec<HistoryTurn>,
    /// Turns older than the first of them, left out.
    pub dropped: u64,
    /// Whether turns were left out or one was cut.
    pub truncated: bool,
}

/// `_lembas/session/history`'s `limit` as given, checked against `sessions.max_history_turns`
/// (`max`, also what none means); or -32602 naming the bound.
fn history_limit(given: Option<u64>, max: usize) -> Result<usize, RpcError> {
    match given {
        None => Ok(max),
        Some(0) => Err(RpcError::invalid_params(
            "limit must be at least 1 (or left out for sessions.max_history_turns)",
        )),
        Some(l) if l > max as u64 => Err(RpcError::over_limit(
            format!(
                "limit {l} is over the most turns this device answers at once, {max} \
                 (sessions.max_history_turns)"
            ),
            max,
        )),
        Some(l) => Ok(l as usize),
    }
}

/// What a finished history read comes to, for Device to route to its connection.
pub(super) enum HistoryAnswered {
    /// The store could not give the turns: the request's refusal.
    Failed(Id, RpcError),
    /// `_lembas/session/history`'s answer, encoded.
    Frame(Vec<u8>),
    /// The turns a `session/load` replays (session_acp.rs takes it on).
    Replay {
        id: Id,
        session_id: String,
        selected: Selected,
        read: super::session_acp::ReplayRead,
    },
}

impl PendingHistory {
    /// The read this request asked for came back: its answer, refusal, or the replay's turns.
    fn answered(self, read: Result<Vec<Entry>, String>) -> HistoryAnswered {
        let entries = match read {
            Ok(entries) => entries,
            Err(why) => {
                let e = RpcError::new(
                    code::INTERNAL_ERROR,
                    format!(
                        "the history of session `{}` could not be read from the store: {why}",
                        self.session_id
                    ),
                );
                return HistoryAnswered::Failed(self.id, e);
            }
        };
        let selected = select(&self, entries);
        match self.purpose {
            Purpose::Answer { title, root } => {
                let result = HistoryResult {
                    session_id: &self.session_id,
                    title: title.as_deref(),
                    root: &root,
                    turns: &selected.turns,
                    truncated: selected.truncated,
                    dropped: selected.dropped,
                };
                HistoryAnswered::Frame(jsonrpc::encode_result(&self.id, &result))
            }
            Purpose::Replay { upto, reads } => HistoryAnswered::Replay {
                read: super::session_acp::ReplayRead {
                    upto,
                    reads,
                    limit: self.limit,
                },
                id: self.id,
                session_id: self.session_id,
                selected,
            },
        }
    }
}

impl Device {
    /// `_lembas/session/history`. Its `root` is the session's working directory, what `@path`
    /// mentions resolve against, not the entry of `remote.roots` that holds it. Answered once
    /// the shell has read the turns from the store.
    pub(super) fn history(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: HistoryParams,
    ) -> Result<(), RpcError> {
        let limit = history_limit(p.limit, self.config.sessions.max_history_turns)?;
        let s = self.attach(conn, &p.session_id)?;
        let purpose = Purpose::Answer {
            title: s.durable.title.clone(),
            root: s.durable.cwd.clone(),
        };
        self.read_history(conn, id, &p.session_id, p.before, limit, purpose);
        Ok(())
    }

    /// Ask the shell for the newest turns of `session` before `before` within the budget
    /// (`sessions.history_bytes`), behind every persist issued so far (the turns just stored
    /// among them).
    pub(super) fn read_history(
        &mut self,
        conn: ConnId,
        id: &Id,
        session: &str,
        before: Option<u64>,
        limit: usize,
        purpose: Purpose,
    ) {
        let max_bytes = self.config.sessions.history_bytes;
        let request = self.history_reads.ask(PendingHistory {
            conn,
            id: id.clone(),
            session_id: session.to_string(),
            limit,
            max_bytes,
            purpose,
        });
        self.out.effect(Effect::ReadHistory {
            request,
            session_id: session.to_string(),
            before,
            limit,
            max_bytes,
        });
    }

    /// The shell read the history `Effect::ReadHistory { request }` asked for: `entries` (the
    /// session's, newest first as `store::HistoryPick` takes them; others are ignored), or
    /// why it could not (the request is answered -32603 with the reason).
    pub fn handle_history_read(
        &mut self,
        request: u64,
        read: Result<Vec<Entry>, String>,
        now: Time,
    ) {
        self.clock.advance(now);
        if let Some(p) = self.history_reads.answered(request) {
            if self.conns.contains_key(&p.conn) {
                self.history_answered(p, read);
            }
        }
        self.after_input();
    }

    fn history_answered(&mut self, p: PendingHistory, read: Result<Vec<Entry>, String>) {
        let conn = p.conn;
        match p.answered(read) {
            HistoryAnswered::Failed(id, e) => self.reply_error(conn, &id, &e),
            HistoryAnswered::Frame(frame) => self.out.send(conn, frame),
            HistoryAnswered::Replay {
                id,
                session_id,
                selected,
                read,
            } => self.replay_loaded(conn, &id, &session_id, selected, read),
        }
    }

    /// A connection went away: its history reads answer no one.
    pub(super) fn forget_history_reads(&mut self, conn: ConnId) {
        self.history_reads.retain(|p| p.conn != conn);
    }
}

/// The turns a history read answers from the entries read: the newest that fit its budget,
/// oldest first, cut at a turn boundary; the newest alone over it is answered alone, cut to
/// fit.
fn select(p: &PendingHistory, entries: Vec<Entry>) -> Selected {
    let prefix = store::session_prefix(&p.session_id);
    let mut read: Vec<(u64, HistoryTurn)> = entries
        .into_iter()
        .filter(|e| e.table == store::Table::History && e.key.starts_with(&prefix))
        .filter_map(|e| {
            let index = store::history_index(&e.key)?;
            // A turn the store cannot give back is left out, as restore leaves it out.
            Some((index, serde_json::from_str(&e.value).ok()?))
        })
        .collect();
    read.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    let mut turns = Vec::new();
    let mut bytes = 0usize;
    let mut cut = false;
    let mut oldest = None;
    for (index, turn) in read {
        if turns.len() >= p.limit {
            break;
        }
        let size = encoded_len(&turn);
        // Each turn after the first adds a comma.
        let add = size + usize::from(!turns.is_empty());
        if bytes + add > p.max_bytes {
            if !turns.is_empty() {
                break;
            }
            // Answered alone: the budget is its.
            turns.push(fit(turn, size, p.max_bytes));
            oldest = Some(index);
            cut = true;
            break;
        }
        bytes += add;
        turns.push(turn);
        oldest = Some(index);
    }
    turns.reverse();
    let dropped = oldest.unwrap_or(0);
    Selected {
        turns,
        dropped,
        truncated: dropped > 0 || cut,
    }
}

fn encoded_len(turn: &HistoryTurn) -> usize {
    serde_json::to_string(turn).map_or(usize::MAX, |t| t.len())
}

/// A turn `size` bytes encoded, over `max_bytes`, cut to fit: its text keeps its first half of
/// the budget and ends saying so, its reasoning a quarter, its tools what fits an eighth; a
/// turn still over it (text that JSON escapes at length) keeps the note alone.
/// `sessions.history_bytes` is at least `MIN_HISTORY_BYTES`, room for the note.
fn fit(turn: HistoryTurn, size: usize, max_bytes: usize) -> HistoryTurn {
    let note = format!(
        "\n\n[this turn is {size} bytes, over the {max_bytes} one history answer holds \
         (sessions.history_bytes): it is cut]"
    );
    let cut = |text: &str, share: usize| -> String {
        let mut t = crate::text::floor_char(text, share).to_string();
        t.push_str(&note);
        t
    };
    let fitted = match &turn {
        HistoryTurn::User {
            text,
            turn_id,
            attachments,
        } => HistoryTurn::User {
            text: cut(text, max_bytes / 2),
            turn_id: turn_id.clone(),
            attachments: attachments.clone(),
        },
        HistoryTurn::Assistant {
            text,
            reasoning,
            tools,
        } => {
            let mut kept = Vec::new();
            let mut room = max_bytes / 8;
            for tool in tools {
                let len = serde_json::to_string(tool).map_or(usize::MAX, |t| t.len() + 1);
                if len > room {
                    break;
                }
                room -= len;
                kept.push(tool.clone());
            }
            HistoryTurn::Assistant {
                text: cut(text, max_bytes / 2),
                reasoning: crate::text::floor_char(reasoning, max_bytes / 4).to_string(),
                tools: kept,
            }
        }
    };
    if encoded_len(&fitted) <= max_bytes {
        return fitted;
    }
    match turn {
        HistoryTurn::User { turn_id, .. } => HistoryTurn::User {
            text: note.trim_start().to_string(),
            turn_id,
            attachments: Vec::new(),
        },
        HistoryTurn::Assistant { .. } => HistoryTurn::Assistant {
            text: note.trim_start().to_string(),
            reasoning: String::new(),
            tools: Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> HistoryTurn {
        HistoryTurn::User {
            text: text.into(),
            turn_id: Some(format!("t {text}")),
            attachments: Vec::new(),
        }
    }

    fn assistant(text: &str) -> HistoryTurn {
        HistoryTurn::Assistant {
            text: text.into(),
            reasoning: "r".repeat(text.len()),
            tools: Vec::new(),
        }
    }

    fn pending(limit: usize, max_bytes: usize) -> PendingHistory {
        PendingHistory {
            conn: ConnId(0),
            id: Id::number(1),
            session_id: "ses_a".into(),
            limit,
            max_bytes,
            purpose: Purpose::Replay { upto: 0, reads: 1 },
        }
    }

    /// The selection as `history` answers it.
    fn answer(p: &PendingHistory, entries: Vec<Entry>) -> serde_json::Value {
        let s = select(p, entries);
        serde_json::json!({ "turns": s.turns, "truncated": s.truncated, "dropped": s.dropped })
    }

    fn entry(index: u64, turn: &HistoryTurn) -> Entry {
        let store::Record::Put { table, key, value } =
            store::history_record("ses_a", index as usize, turn)
        else {
            unreachable!()
        };
        Entry { table, key, value }
    }

    #[test]
    fn recent_keeps_what_the_next_context_can_take_and_counts_on_from_the_store() {
        let limits = SessionLimits {
            max_context_turns: 2,
            max_context_bytes: 100,
            ..SessionLimits::default()
        };
        let light = |text: &str| HistoryTurn::Assistant {
            text: text.into(),
            reasoning: String::new(),
            tools: Vec::new(),
        };
        let stored = vec![(7, assistant("a7")), (6, user("u6")), (5, assistant("a5"))];
        let mut r = Recent::restored(stored, |_| false, &limits);
        // An answer with no prompt before it answers nothing; reasoning is not kept.
        assert_eq!(r.turns(), [user("u6"), light("a7")]);
        assert_eq!(r.push(&user("u8"), false, &limits), 8);
        assert_eq!(r.turns(), [user("u6"), light("a7"), user("u8")]);
        // A failed turn's answer is kept as none, and is not counted.
        assert_eq!(r.push(&assistant("a8"), true, &limits), 9);
        assert_eq!(r.push(&user("u10"), false, &limits), 10);
        assert_eq!(r.push(&assistant("a10"), false, &limits), 11);
        assert_eq!(
            r.turns(),
            [
                user("u6"),
                light("a7"),
                user("u8"),
                light(""),
                user("u10"),
                light("a10")
            ]
        );
        // Two answered turns at most: the oldest goes.
        r.push(&user("u12"), false, &limits);
        r.push(&assistant("a12"), false, &limits);
        assert_eq!(
            r.turns(),
            [user("u10"), light("a10"), user("u12"), light("a12")]
        );
        // Bytes bound it too: one long answer leaves only its own turn, and one over the
        // bound nothing but a prompt waiting for its answer.
        r.push(&user("u14"), false, &limits);
        r.push(&assistant(&"x".repeat(95)), false, &limits);
        assert_eq!(r.turns().len(), 2);
        r.push(&user("u16"), false, &limits);
        r.push(&assistant(&"x".repeat(100)), false, &limits);
        assert!(r.turns().is_empty());
        r.push(&user("u18"), false, &limits);
        assert_eq!(r.turns(), [user("u18")]);
        assert_eq!(
            Recent::restored(Vec::new(), |_| false, &limits).push(&user("x"), false, &limits),
            0
        );
        // Restored, a failed turn (as its ledger says) answers nothing.
        let stored = vec![(0, user("u0")), (1, assistant("a0"))];
        let failed = Recent::restored(stored, |t| t == "t u0", &limits);
        assert_eq!(failed.turns(), Vec::<HistoryTurn>::new());
    }

    #[test]
    fn an_answer_keeps_the_newest_turns_within_the_budget_and_counts_the_rest() {
        let turns: Vec<HistoryTurn> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    user(&format!("u{i}"))
                } else {
                    assistant(&format!("a{i}"))
                }
            })
            .collect();
        let entries = || -> Vec<Entry> {
            turns
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| entry(i as u64, t))
                .collect()
        };
        let whole = answer(&pending(100, 1 << 20), entries());
        assert_eq!(whole["turns"].as_array().unwrap().len(), 10);
        assert_eq!(
            (whole["truncated"].clone(), whole["dropped"].clone()),
            (false.into(), 0.into())
        );
        let limited = answer(&pending(3, 1 << 20), entries());
        assert_eq!(limited["turns"].as_array().unwrap().len(), 3);
        assert_eq!(limited["turns"][0]["text"], "a7");
        assert_eq!(
            (limited["truncated"].clone(), limited["dropped"].clone()),
            (true.into(), 7.into())
        );
        // Within the budget: as many whole turns as fit, encoded, with their commas.
        let three = serde_json::to_string(&turns[7..]).unwrap().len() - 2;
        let fits = answer(&pending(100, three), entries());
        assert_eq!(fits["dropped"], 7);
        let short = answer(&pending(100, three - 1), entries());
        assert_eq!(short["dropped"], 8);
        assert_eq!(short["turns"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn one_turn_over_the_budget_is_cut_to_fit_saying_so() {
        let big = assistant(&"x".repeat(20_000));
        let got = answer(
            &pending(100, 4096),
            vec![entry(4, &big), entry(3, &user("u"))],
        );
        let turns = got["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 1);
        assert!(serde_json::to_string(turns).unwrap().len() <= 4096);
        let text = turns[0]["text"].as_str().unwrap();
        assert!(text.starts_with(&"x".repeat(2048)), "keeps its start");
        assert!(text.contains("sessions.history_bytes"), "{text}");
        assert_eq!(
            (got["truncated"].clone(), got["dropped"].clone()),
            (true.into(), 4.into())
        );
        // Text JSON escapes at length (control characters, 6 bytes each) keeps the note alone.
        let escaped = user(&"\u{1}".repeat(4000));
        let got = answer(&pending(100, 4096), vec![entry(0, &escaped)]);
        let text = got["turns"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("[this turn is"), "{text}");
        assert_eq!(
            (got["truncated"].clone(), got["dropped"].clone()),
            (true.into(), 0.into())
        );
    }

    #[test]
    fn the_limit_is_checked_against_max_history_turns() {
        assert_eq!(history_limit(None, 50), Ok(50));
        assert_eq!(history_limit(Some(50), 50), Ok(50));
        assert_eq!(history_limit(Some(1), 50), Ok(1));
        let zero = history_limit(Some(0), 50).unwrap_err();
        assert_eq!(
            zero.message,
            "limit must be at least 1 (or left out for sessions.max_history_turns)"
        );
        let over = history_limit(Some(51), 50).unwrap_err();
        assert_eq!(
            over.message,
            "limit 51 is over the most turns this device answers at once, 50 \
             (sessions.max_history_turns)"
        );
        assert_eq!(over.data, Some(serde_json::json!({ "limit": 50 })));
    }

    #[test]
    fn a_read_comes_to_a_refusal_an_answer_or_a_replay() {
        let mut failed = pending(10, 1 << 20);
        failed.id = Id::number(7);
        let HistoryAnswered::Failed(id, e) = failed.answered(Err("disk gone".into())) else {
            panic!("a failed read is refused")
        };
        assert_eq!(id.as_json(), "7");
        assert_eq!(e.code, code::INTERNAL_ERROR);
        assert_eq!(
            e.message,
            "the history of session `ses_a` could not be read from the store: disk gone"
        );

        let mut asked = pending(10, 1 << 20);
        asked.purpose = Purpose::Answer {
            title: Some("T".into()),
            root: "/w".into(),
        };
        let entries = vec![entry(1, &assistant("a1")), entry(0, &user("u0"))];
        let HistoryAnswered::Frame(frame) = asked.answered(Ok(entries.clone())) else {
            panic!("a history request is answered")
        };
        let frame: serde_json::Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(frame["id"], 1);
        let result = &frame["result"];
        assert_eq!(
            (&result["sessionId"], &result["title"], &result["root"]),
            (&"ses_a".into(), &"T".into(), &"/w".into())
        );
        assert_eq!(result["turns"].as_array().unwrap().len(), 2);
        assert_eq!(result["turns"][0]["text"], "u0");
        assert_eq!(
            (&result["truncated"], &result["dropped"]),
            (&false.into(), &0.into())
        );

        let mut replay = pending(3, 1 << 20);
        replay.purpose = Purpose::Replay { upto: 9, reads: 2 };
        let HistoryAnswered::Replay {
            id,
            session_id,
            selected,
            read,
        } = replay.answered(Ok(entries))
        else {
            panic!("a load's read is replayed")
        };
        assert_eq!((id.as_json(), session_id.as_str()), ("1", "ses_a"));
        assert_eq!((read.upto, read.reads, read.limit), (9, 2, 3));
        assert_eq!(selected.turns, [user("u0"), assistant("a1")]);
    }
}
