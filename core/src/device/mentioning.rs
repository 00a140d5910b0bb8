//! A prompt's `@path` mentions made attachments. The mentions are found on text alone
//! ([`crate::mentions`]) when the prompt comes; the shell reads them, confined
//! (`Effect::ReadMentions`: inside the session's project, inside `remote.roots` for a session
//! under the limits, not protected, symlinks followed), and each read becomes an attachment
//! written under the session's attachment directory like an uploaded one
//! (`Effect::WriteAttachment`), so the engine reads and shows it as it does those: a text
//! line-numbered (from its range's first line), an image by vision, a listing as it is. The
//! turn waits for the read and the writes.
//!
//! Nothing is read for a mention that is not attached: it stays text, and a `notice` when the
//! turn starts says why (outside, protected, missing, a limit). Every bound that cuts
//! something (`mentions.max_file_bytes`, `max_listing_entries`, `max_per_prompt`) is named
//! in the notice. The core checks again that what the shell read is inside the project and
//! the roots (the shell alone knows the protected paths).

use super::{Device, Effect};
use crate::config::{MentionLimits, Remote};
use crate::engine::{Attachment, LISTING_MIME};
use crate::mentions::{image_mime, Mention, MentionRead};
use crate::paths;

/// Whose mentions are to be read.
pub(super) struct Asked {
    pub session: String,
    pub turn_id: String,
    /// The session's directory (resolved when the session was made).
    pub project: String,
    /// A session under the limits (the link's): read only inside `remote.roots`.
    pub capped: bool,
}

/// A read asked of the shell, until its answer.
#[derive(Debug)]
pub(super) struct Pending {
    session: String,
    turn_id: String,
    project: String,
    roots: Vec<String>,
    mentions: Vec<Mention>,
    /// Said when the turn starts, whatever the read gives (mentions past the bound).
    notices: Vec<String>,
}

impl Asked {
    /// The read to ask of the shell for `mentions`: those past `mentions.max_per_prompt`
    /// stay text (a notice says so). A session under the limits reads only inside the roots:
    /// with remote work off or no roots there is nowhere, and `true` says nothing is to be
    /// asked of the shell (an empty list would mean no bound to it).
    fn pending(
        self,
        mut mentions: Vec<Mention>,
        limits: MentionLimits,
        remote: &Remote,
    ) -> (Pending, bool) {
        let mut notices = Vec::new();
        if mentions.len() > limits.max_per_prompt {
            let left: Vec<String> = mentions
                .drain(limits.max_per_prompt..)
                .map(|m| m.written)
                .collect();
            notices.push(format!(
                "{} mention{} past the first {} stayed text, not attached \
                 (mentions.max_per_prompt is {}): {}",
                left.len(),
                if left.len() == 1 { "" } else { "s" },
                limits.max_per_prompt,
                limits.max_per_prompt,
                left.join(" ")
            ));
        }
        let roots = if self.capped {
            remote.roots.clone()
        } else {
            Vec::new()
        };
        let closed = self.capped && (!remote.enabled || remote.roots.is_empty());
        let pending = Pending {
            session: self.session,
            turn_id: self.turn_id,
            project: self.project,
            roots,
            mentions,
            notices,
        };
        (pending, closed)
    }
}

/// What a prompt's mentions read came to: what is said when the turn starts, and the reads
/// to attach.
struct Judged {
    notices: Vec<String>,
    made: Vec<Made>,
}

/// A mention read to attach.
struct Made {
    /// Its index among the pending read's mentions.
    mention: usize,
    kind: Kind,
    bytes: Vec<u8>,
    /// The path it was read at, which the recent files remember.
    real: String,
}

impl Pending {
    /// The shell's read of this request's mentions, `request`.
    fn effect(&self, request: u64, limits: MentionLimits) -> Effect {
        Effect::ReadMentions {
            request,
            project: self.project.clone(),
            roots: self.roots.clone(),
            mentions: self.mentions.clone(),
            max_file_bytes: limits.max_file_bytes,
            max_entries: limits.max_listing_entries,
        }
    }

    /// The shell's reads (or why there are none) judged, one a mention, in their order.
    fn judge(&mut self, read: Result<Vec<MentionRead>, String>, limits: MentionLimits) -> Judged {
        let mut notices = std::mem::take(&mut self.notices);
        let mut made = Vec::new();
        match read {
            Err(why) => {
                let written: Vec<&str> = self.mentions.iter().map(|m| m.written.as_str()).collect();
                notices.push(format!(
                    "{} stayed text, not attached: {why}",
                    written.join(" ")
                ));
            }
            Ok(reads) => {
                // One read a mention; a shell that answered fewer left the rest unread.
                let mut reads = reads.into_iter();
                for (i, m) in self.mentions.iter().enumerate() {
                    let judged = match reads.next() {
                        Some(r) => judge(&self.project, &self.roots, m, r, limits),
                        None => Err("the shell did not read it".into()),
                    };
                    match judged {
                        Ok((kind, bytes, said, real)) => {
                            notices.extend(said);
                            made.push(Made {
                                mention: i,
                                kind,
                                bytes,
                                real,
                            });
                        }
                        Err(why) => {
                            notices.push(format!("{} stayed text, not attached: {why}", m.written))
                        }
                    }
                }
            }
        }
        Judged { notices, made }
    }
}

impl Device {
    /// Ask the shell to read `mentions` for a turn just queued: the number of the request
    /// (the turn waits for it). Past `mentions.max_per_prompt` they stay text.
    pub(super) fn ask_mentions(&mut self, asked: Asked, mentions: Vec<Mention>) -> u64 {
        let limits = self.config.mentions;
        let (pending, closed) = asked.pending(mentions, limits, &self.config.remote);
        let effect = (!closed).then(|| pending.effect(self.mention_reads.next_number(), limits));
        let request = self.mention_reads.ask(pending);
        match effect {
            Some(effect) => self.out.effect(effect),
            None => {
                let why = "remote work is off on this device or it has no roots (remote.roots)";
                self.mentions_read(request, Err(why.into()));
            }
        }
        request
    }

    /// The shell read a prompt's mentions (`Effect::ReadMentions`), or could not.
    pub fn handle_mentions_read(
        &mut self,
        request: u64,
        read: Result<Vec<MentionRead>, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        self.mentions_read(request, read);
        self.after_input();
    }

    fn mentions_read(&mut self, request: u64, read: Result<Vec<MentionRead>, String>) {
        let Some(mut p) = self.mention_reads.answered(request) else {
            return;
        };
        let now = self.clock.now().0;
        let judged = p.judge(read, self.config.mentions);
        let notices = judged.notices;
        let mut made: Vec<(Attachment, Vec<u8>)> = Vec::new();
        for r in judged.made {
            let max = self.config.files.max_recent;
            let kept = self.frecency.used(&r.real, now, max);
            self.out.persist(vec![kept]);
            let token = self.rng.token(8);
            let m = &p.mentions[r.mention];
            made.push((r.kind.attachment(m, now, &token, r.bytes.len()), r.bytes));
        }
        let Some(s) = self.sessions.get_mut(&p.session) else {
            return;
        };
        if s.turns.reading(request).is_none() {
            return;
        }
        let mut attachments = Vec::new();
        let mut writing = Vec::new();
        let mut writes = Vec::new();
        for (a, bytes) in made {
            let request = self
                .writes
                .ask((p.session.clone(), p.turn_id.clone(), a.name.clone()));
            writing.push(request);
            writes.push(Effect::WriteAttachment {
                request,
                session_id: p.session.clone(),
                file_name: a.file_name.clone(),
                bytes,
            });
            attachments.push(a);
        }
        s.turns
            .mentions_read(request, attachments, writing, notices);
        for w in writes {
            self.out.effect(w);
        }
        self.pump(&p.session);
    }
}

/// What a mention becomes.
enum Kind {
    /// A text, line-numbered from `first_line`.
    Text {
        first_line: Option<u64>,
    },
    Image(&'static str),
    Listing,
}

impl Kind {
    fn attachment(&self, m: &Mention, now: u64, token: &str, size: usize) -> Attachment {
        let name = match m.lines {
            Some((a, b)) if a == b => format!("{}#{a}", m.path),
            Some((a, b)) => format!("{}#{a}-{b}", m.path),
            None => m.path.clone(),
        };
        let file = super::prompt_blocks::safe_name(Some(m.path.trim_end_matches('/')), "mention");
        let (mime, text, first_line) = match self {
            Kind::Text { first_line } => ("text/plain", true, *first_line),
            Kind::Image(mime) => (*mime, false, None),
            Kind::Listing => (LISTING_MIME, true, None),
        };
        Attachment {
            file_name: format!("{now}-{token}-{file}"),
            name,
            mime_type: mime.into(),
            size: size as u64,
            text,
            first_line,
        }
    }
}

/// A read judged: what to attach and what to say of it, or why it stays text. The shell
/// confined it already; what it names must still be inside the project and the roots.
fn judge(
    project: &str,
    roots: &[String],
    m: &Mention,
    read: MentionRead,
    limits: MentionLimits,
) -> Result<(Kind, Vec<u8>, Vec<String>, String), String> {
    let inside = |real: &str| {
        paths::normalize(real).is_some_and(|real| {
            paths::inside(&real, project)
                && (roots.is_empty() || paths::within(&real, roots).is_some())
        })
    };
    let mut said = Vec::new();
    match read {
        MentionRead::Refused { reason } => Err(reason),
        MentionRead::File { real, .. } | MentionRead::Listing { real, .. } if !inside(&real) => {
            // Where it leads is not named: it is outside.
            Err("it is outside the session's project or the device's roots".into())
        }
        MentionRead::Listing { .. } | MentionRead::File { .. } if m.dir && m.lines.is_some() => {
            Err("a directory has no lines".into())
        }
        MentionRead::File { .. } if m.dir => Err("it is a file, not a directory".into()),
        MentionRead::Listing { .. } if m.lines.is_some() => Err("it is a directory".into()),
        MentionRead::Listing {
            entries,
            total,
            real,
        } => {
            let mut body = entries.join("\n");
            let shown = entries.len() as u64;
            if total > shown {
                let max = limits.max_listing_entries;
                body.push_str(&format!(
                    "\n({} more entries not shown: mentions.max_listing_entries is {max})",
                    total - shown
                ));
                said.push(format!(
                    "{} lists the first {shown} of its {total} entries \
                     (mentions.max_listing_entries is {max})",
                    m.written
                ));
            }
            Ok((Kind::Listing, body.into_bytes(), said, real))
        }
        MentionRead::File {
            real,
            bytes,
            size,
            text,
            lines_total,
        } => {
            let max = limits.max_file_bytes;
            let cut = (bytes.len() as u64) < size;
            if let (Some((first, last)), Some(total)) = (m.lines, lines_total) {
                if first == 0 || last < first {
                    return Err(format!(
                        "lines {first}-{last} name no line (lines count from 1)"
                    ));
                }
                if first > total {
                    return Err(format!("it has {total} lines, none from line {first}"));
                }
                if last > total {
                    said.push(format!(
                        "{} has {total} lines: lines {first}-{total} are attached",
                        m.written
                    ));
                }
            }
            // An image by its name, whatever its bytes look like; a range of one is text.
            if let Some(mime) = image_mime(&real).filter(|_| m.lines.is_none()) {
                if cut {
                    return Err(format!(
                        "the image is {size} bytes, over mentions.max_file_bytes ({max})"
                    ));
                }
                return Ok((Kind::Image(mime), bytes, said, real));
            }
            if !text {
                return Err("it is a binary file".into());
            }
            if cut {
                said.push(format!(
                    "{} was cut to its first {} of {size} bytes (mentions.max_file_bytes is \
                     {max})",
                    m.written,
                    bytes.len()
                ));
            }
            let first_line = m.lines.map(|(first, _)| first);
            Ok((Kind::Text { first_line }, bytes, said, real))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(capped: bool) -> Asked {
        Asked {
            session: "ses_a".into(),
            turn_id: "t1".into(),
            project: "/w/p".into(),
            capped,
        }
    }

    fn remote(enabled: bool, roots: &[&str]) -> Remote {
        Remote {
            enabled,
            roots: roots.iter().map(|r| r.to_string()).collect(),
            ..Remote::default()
        }
    }

    fn limits(max_per_prompt: usize) -> MentionLimits {
        MentionLimits {
            max_per_prompt,
            ..MentionLimits::default()
        }
    }

    fn file(real: &str, text: &str) -> MentionRead {
        MentionRead::File {
            real: real.into(),
            bytes: text.as_bytes().to_vec(),
            size: text.len() as u64,
            text: true,
            lines_total: None,
        }
    }

    #[test]
    fn mentions_past_the_bound_stay_text_and_a_capped_session_reads_only_in_the_roots() {
        let found = crate::mentions::find("@a @b @c");
        let (p, closed) = asked(false).pending(found.clone(), limits(1), &remote(false, &[]));
        assert!(!closed, "an editor's session reads with no roots");
        assert_eq!(p.mentions.len(), 1);
        assert!(p.roots.is_empty());
        assert_eq!(
            p.notices,
            ["2 mentions past the first 1 stayed text, not attached \
              (mentions.max_per_prompt is 1): @b @c"]
        );
        let (p, closed) = asked(true).pending(found.clone(), limits(5), &remote(true, &["/w"]));
        assert!(!closed);
        assert_eq!((p.roots, p.notices.len()), (vec!["/w".to_string()], 0));
        assert!(
            asked(true)
                .pending(found.clone(), limits(5), &remote(false, &["/w"]))
                .1
        );
        assert!(asked(true).pending(found, limits(5), &remote(true, &[])).1);
    }

    #[test]
    fn reads_are_judged_in_order_and_what_is_not_attached_is_said() {
        let found = crate::mentions::find("@a.txt @b.txt @c.txt");
        let (mut p, _) = asked(false).pending(found.clone(), limits(5), &remote(true, &[]));
        let reads = vec![file("/w/p/a.txt", "hello"), file("/elsewhere/b.txt", "no")];
        let judged = p.judge(Ok(reads), limits(5));
        assert_eq!(judged.made.len(), 1);
        let made = &judged.made[0];
        assert_eq!((made.mention, made.real.as_str()), (0, "/w/p/a.txt"));
        assert_eq!(made.bytes, b"hello");
        assert_eq!(
            judged.notices,
            [
                "@b.txt stayed text, not attached: it is outside the session's project or the \
                 device's roots",
                "@c.txt stayed text, not attached: the shell did not read it",
            ]
        );
        let (mut p, _) = asked(false).pending(found, limits(5), &remote(true, &[]));
        let judged = p.judge(Err("no shell".into()), limits(5));
        assert!(judged.made.is_empty());
        assert_eq!(
            judged.notices,
            ["@a.txt @b.txt @c.txt stayed text, not attached: no shell"]
        );
    }
}
