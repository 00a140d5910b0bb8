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

impl Device {
    /// Ask the shell to read `mentions` for a turn just queued: the number of the request
    /// (the turn waits for it). Past `mentions.max_per_prompt` they stay text.
    pub(super) fn ask_mentions(&mut self, asked: Asked, mut mentions: Vec<Mention>) -> u64 {
        let limits = self.config.mentions;
        let remote = &self.config.remote;
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
        // A session under the limits reads only inside the roots: with remote work off or no
        // roots there is nowhere, and nothing is asked of the shell (an empty list would mean
        // no bound to it).
        let roots = if asked.capped {
            remote.roots.clone()
        } else {
            Vec::new()
        };
        let closed = asked.capped && (!remote.enabled || remote.roots.is_empty());
        let pending = Pending {
            session: asked.session,
            turn_id: asked.turn_id,
            project: asked.project.clone(),
            roots: roots.clone(),
            mentions: mentions.clone(),
            notices,
        };
        let request = self.mention_reads.ask(pending);
        if closed {
            let why = "remote work is off on this device or it has no roots (remote.roots)";
            self.mentions_read(request, Err(why.into()));
        } else {
            self.out.effect(Effect::ReadMentions {
                request,
                project: asked.project,
                roots,
                mentions,
                max_file_bytes: limits.max_file_bytes,
                max_entries: limits.max_listing_entries,
            });
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
        let Some(p) = self.mention_reads.answered(request) else {
            return;
        };
        let limits = self.config.mentions;
        let now = self.clock.now().0;
        let mut notices = p.notices;
        let mut made: Vec<(Attachment, Vec<u8>)> = Vec::new();
        match read {
            Err(why) => {
                let written: Vec<&str> = p.mentions.iter().map(|m| m.written.as_str()).collect();
                notices.push(format!(
                    "{} stayed text, not attached: {why}",
                    written.join(" ")
                ));
            }
            Ok(reads) => {
                // One read a mention; a shell that answered fewer left the rest unread.
                let mut reads = reads.into_iter();
                for m in &p.mentions {
                    let judged = match reads.next() {
                        Some(r) => judge(&p.project, &p.roots, m, r, limits),
                        None => Err("the shell did not read it".into()),
                    };
                    match judged {
                        Ok((kind, bytes, said, real)) => {
                            notices.extend(said);
                            let max = self.config.files.max_recent;
                            let kept = self.frecency.used(&real, now, max);
                            self.out.persist(vec![kept]);
                            let token = self.rng.token(8);
                            made.push((kind.attachment(m, now, &token, bytes.len()), bytes));
                        }
                        Err(why) => {
                            notices.push(format!("{} stayed text, not attached: {why}", m.written))
                        }
                    }
                }
            }
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
    limits: crate::config::MentionLimits,
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
