Feature: /undo: the session's last turn undone, its files put back
  Spec, "session/prompt" (`undo` is an action; `undone: { prompt, files } | null`): `/undo`
  sends nothing to the model. It undoes the session's last turn the model is still given (not
  reverted, not folded into a compaction's summary): its messages are reverted as
  `_lembas/session/rewind` reverts them, and the shell puts back the files that turn's tools
  changed, each only while it is still what the turn left (a file the turn created is removed;
  what the shell kept and how is tested in runtime-smol's tools/undo.rs and the end to end
  test). The prompt is answered `_meta.lembas.undone = { prompt, files }`, or `undone: null`
  with nothing to undo; the files the shell could not put back are named in a `notice`. Sent
  while a turn runs, `/undo` waits for it and undoes it.

  Scenario: /undo reverts the last turn and answers what it put back
    Given a client with a session on the device
    And the shell puts back "a.txt, src/b.rs" for turn "t2"
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "/undo" as turn "t3"
    Then in the answer of turn "t3", "_meta.lembas.undone" is {"prompt":"say two","files":["a.txt","src/b.rs"]}
    And in the answer of turn "t3", "_meta.lembas.command" is "undo"
    And the shell was asked to undo the turns "t2"
    And the engine has not started turn "t3"
    When the client asks the session's history
    Then the history answered is "say one", "one"
    When the client prompts "say three" as turn "t4"
    Then the engine started turn "t4" with the summary "none" and the earlier turns "say one"

  Scenario: With nothing to undo, /undo answers null and asks the shell nothing
    Given a client with a session on the device
    When the client prompts "/undo" as turn "t1"
    Then in the answer of turn "t1", "_meta.lembas.undone" is null
    And the shell was asked to undo the turns ""

  Scenario: Each /undo goes back one turn more
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "/undo" as turn "t3"
    And the client prompts "/undo" as turn "t4"
    And the client prompts "/undo" as turn "t5"
    Then in the answer of turn "t4", "_meta.lembas.undone" is {"prompt":"say one","files":[]}
    And in the answer of turn "t5", "_meta.lembas.undone" is null
    And the shell was asked to undo the turns "t2, t1"

  Scenario: /undo sent while a turn runs waits for it and undoes it
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "sleep 5000\nsay two" as turn "t2"
    And the client prompts "/undo" as turn "t3"
    Then no prompt of turn "t3" has been answered yet
    When 6 seconds pass
    Then in the answer of turn "t3", "_meta.lembas.undone" is {"prompt":"sleep 5000\nsay two","files":[]}

  Scenario: The turn to undo is found again after a restart
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the device restarts from its store
    And the client prompts "/undo" as turn "t2"
    Then in the answer of turn "t2", "_meta.lembas.undone" is {"prompt":"say one","files":[]}
    When the device restarts from its store
    And the client prompts "say two" as turn "t3"
    Then the engine started turn "t3" with the summary "none" and the earlier turns "nothing"

  Scenario: A restart while the shell puts the files back carries the undo out
    The revert and the undo under way are stored before the shell is asked; the restarted
    device asks it again (putting back is idempotent) and the `/undo` ends with its real
    answer, which the client's reattach gets, not `cancelled`.
    Given a client with a session on the device
    And the shell puts back "a.txt" for turn "t2"
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the shell takes its time putting files back
    And the client prompts "/undo" as turn "t3"
    Then no prompt of turn "t3" has been answered yet
    When the device restarts from its store before the shell answers
    Then the shell was asked to undo the turns "t2, t2"
    And in the answer of turn "t3", "_meta.lembas.undone" is {"prompt":"say two","files":["a.txt"]}
    And in the answer of turn "t3", "stopReason" is "end_turn"
    When the client asks the session's history
    Then the history answered is "say one", "one"
    When the client prompts "/undo" as turn "t3"
    And the device restarts from its store
    Then the shell was asked to undo the turns "t2, t2"
    And in the answer of turn "t3", "_meta.lembas.undone" is {"prompt":"say two","files":["a.txt"]}

  Scenario: A file the shell could not put back is named in a notice
    Given a client with a session on the device
    And the shell puts back "a.txt" for turn "t1" and leaves "b.txt" as "changed since the turn; left as it is"
    When the client prompts "say one" as turn "t1"
    And the client prompts "/undo" as turn "t2"
    Then in the answer of turn "t2", "_meta.lembas.undone" is {"prompt":"say one","files":["a.txt"]}
    And the link carried the event {"type":"notice","text":"undoing turn `t1` left 1 file as it is now: `b.txt` (changed since the turn; left as it is)"}

  Scenario: A shell that cannot put the files back says why, and the messages stay reverted
    Given a client with a session on the device
    And the shell cannot put back the files of turn "t1": "its journal cannot be read: disk"
    When the client prompts "say one" as turn "t1"
    And the client prompts "/undo" as turn "t2"
    Then in the answer of turn "t2", "_meta.lembas.undone" is {"prompt":"say one","files":[]}
    And the link carried the event {"type":"notice","text":"the files turn `t1` changed could not be put back: its journal cannot be read: disk"}

  Scenario: An undo of a turn whose files are no longer kept says so, naming the bound
    The shell keeps what /undo needs for the last `sessions.undo_turns` turns that changed
    files and notes the turns past them (runtime-smol's tools/undo.rs tests it on a disk).
    Given a client with a session on the device
    And the shell cannot put back the files of turn "t1": "only the last 5 turns that changed files keep what /undo needs (sessions.undo_turns)"
    When the client prompts "say one" as turn "t1"
    And the client prompts "/undo" as turn "t2"
    Then in the answer of turn "t2", "_meta.lembas.undone" is {"prompt":"say one","files":[]}
    And the link carried the event {"type":"notice","text":"the files turn `t1` changed could not be put back: only the last 5 turns that changed files keep what /undo needs (sessions.undo_turns)"}

  Scenario: A turn folded into a summary is not undone
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client prompts "/undo" as turn "t3"
    Then in the answer of turn "t3", "_meta.lembas.undone" is null
