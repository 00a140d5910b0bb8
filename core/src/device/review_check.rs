//! A `/review` waits, when it is next to run, for the shell to look in git for something to
//! review (`Effect::CheckChanges`, in the session's project: the turns before it have made
//! their changes by then). Something found: it runs as the prompt command it is. Nothing
//! (no change, no repository, no such branch, no disk): its prompt is answered at once with
//! `_meta.lembas.message` saying so ([`crate::review`]) and nothing is sent to the model; the
//! answer is kept like a turn's, so the same turn id sent again gets it. A look that fails
//! (git missing, the project gone) sends the review anyway, with a notice saying why nothing
//! was checked: the model can still say what it finds.

use super::outbox::Lane;
use super::{Device, Effect};
use crate::engine::StopReason;
use crate::review::{nothing_to_review, Changes};
use crate::store;
use crate::turn::Answer;
use crate::wire::session::TurnNotes;

/// A look for changes asked of the shell, until its answer: the session whose next turn
/// waits for it.
#[derive(Debug)]
pub(super) struct PendingCheck {
    session: String,
}

impl Device {
    /// The next turn of `session` is a `/review` waiting only for its look for changes: ask
    /// the shell now. Whether it was asked.
    pub(super) fn ask_review(&mut self, session: &str) -> bool {
        let request = self.change_checks.next_number();
        let roots = self.config.remote.roots.clone();
        let Some(s) = self.sessions.get_mut(session) else {
            return false;
        };
        let Some((project, target)) = s.turns.ask_review(request) else {
            return false;
        };
        // A session under the limits is looked at only inside the roots.
        let roots = if s.capped { roots } else { Vec::new() };
        let asked = self.change_checks.ask(PendingCheck {
            session: session.to_owned(),
        });
        debug_assert_eq!(asked, request);
        self.out.effect_in(
            Lane::of(session),
            Effect::CheckChanges {
                request,
                project,
                roots,
                branch: target.branch().map(str::to_owned),
            },
        );
        true
    }

    /// The shell looked for something to review (`Effect::CheckChanges`), or could not.
    pub fn handle_changes_checked(
        &mut self,
        request: u64,
        changes: Result<Changes, String>,
        now: crate::Time,
    ) {
        self.clock.advance(now);
        self.changes_checked(request, changes);
        self.after_input();
    }

    fn changes_checked(&mut self, request: u64, changes: Result<Changes, String>) {
        let Some(p) = self.change_checks.answered(request) else {
            return;
        };
        let now = self.clock.now().0;
        let Some(s) = self.sessions.get_mut(&p.session) else {
            return;
        };
        let project = s.durable.cwd.clone();
        let notices = match &changes {
            Err(why) => vec![format!(
                "`/review` could not look for changes first ({why}): the review was sent anyway"
            )],
            Ok(_) => Vec::new(),
        };
        let Some(target) = s.turns.review_checked(request, notices) else {
            return;
        };
        let message = changes
            .ok()
            .and_then(|c| nothing_to_review(c, &target, &project));
        if let Some(message) = message {
            let notes = TurnNotes {
                command: Some("review".into()),
                message: Some(message),
                ..TurnNotes::default()
            };
            let answer = Answer::stopped(StopReason::EndTurn, notes);
            if let Some((turn_id, order, waiting)) = s.turns.answer_next(answer.clone()) {
                let record = store::done_record(&p.session, &turn_id, order, &answer, now, None);
                self.out.persist_in(Lane::of(&p.session), vec![record]);
                self.answer_waiting(&p.session, &turn_id, &answer, waiting);
            }
        }
        self.pump(&p.session);
    }
}
