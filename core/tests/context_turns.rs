//! A turn is given the session's earlier finished turns (`TurnStart.history`), at most
//! `sessions.max_context_turns` of them, so a model sees the conversation so far.

use lembas_core::engine::PriorTurn;
use lembas_core::testing::Pair;

fn prompt(p: &mut Pair, session: &str, turn: &str, text: &str) {
    p.prompt_text(session, turn, text);
    p.settle().unwrap();
}

fn history_of(p: &Pair, turn: &str) -> Vec<PriorTurn> {
    p.started
        .iter()
        .find(|t| t.turn_id == turn)
        .unwrap_or_else(|| panic!("turn {turn} never started"))
        .history
        .clone()
}

#[test]
fn a_second_prompt_is_given_the_first_turn_and_only_the_last_few_are_kept() {
    let mut p = Pair::default_with(&["/work"], |d| d.sessions.max_context_turns = 2);
    // Two turns of context at most, counted among those that answered.
    p.start().unwrap();
    let s = p.new_session("/work/app");
    prompt(&mut p, &s, "t1", "say one");
    assert!(history_of(&p, "t1").is_empty());
    prompt(&mut p, &s, "t2", "say two");
    assert_eq!(
        history_of(&p, "t2"),
        [PriorTurn {
            prompt: "say one".into(),
            answer: "one".into()
        }]
    );
    // A failed turn is not given, though it said something before it failed.
    prompt(&mut p, &s, "bad", "say half\nfail the instance went away");
    prompt(&mut p, &s, "t3", "say three");
    let prompts: Vec<String> = history_of(&p, "t3").into_iter().map(|t| t.prompt).collect();
    assert_eq!(prompts, ["say one", "say two"]);
    prompt(&mut p, &s, "t4", "say four");
    let prompts: Vec<String> = history_of(&p, "t4").into_iter().map(|t| t.prompt).collect();
    assert_eq!(prompts, ["say two", "say three"]);
    // Read back from the store after a restart, the history is given all the same.
    p.restart_device().unwrap();
    prompt(&mut p, &s, "t5", "say five");
    let answers: Vec<String> = history_of(&p, "t5").into_iter().map(|t| t.answer).collect();
    assert_eq!(answers, ["three", "four"]);
}
