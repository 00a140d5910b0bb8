Feature: /compact and _lembas/session/compact: the earlier turns folded into a summary
  Spec, "session/prompt" (`summary`), "_lembas/session/compact" and the `compacted` event:
  `/compact` is an action that sends nothing to the model as a turn; the session's engine
  writes a summary of the earlier turns the model is given (the scripted engine says
  `summary: <prompt> => <answer> | …`), the prompt is answered with `_meta.lembas.summary`,
  and the `compacted` event carries it. From then on the model is given the summary in place
  of the folded turns; the history still shows them. The summary is kept in the store, at most
  `sessions.max_summary_bytes` of it (the cut said in a `notice`). With nothing to fold,
  `/compact` answers `message`; `_lembas/session/compact` answers `{ summary }`, and is
  refused with -32602 while the session works or when there is nothing to fold.

  Scenario: /compact folds the earlier turns into a summary the later turns are given
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "/compact" as turn "t3"
    Then the engine was last asked to fold "say one | say two" after the summary "none"
    And in the answer of turn "t3", "_meta.lembas.summary" is "summary: say one => one | say two => two"
    And in the answer of turn "t3", "_meta.lembas.command" is "compact"
    And the link carried the event {"type":"compacted","summary":"summary: say one => one | say two => two"}
    And no message chunk on the link says "summary:"
    When the client prompts "say three" as turn "t4"
    Then the engine started turn "t4" with the summary "summary: say one => one | say two => two" and the earlier turns "nothing"

  Scenario: The history still shows the folded turns, and not the compaction
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client asks the session's history
    Then the history answered is "say one", "one"

  Scenario: A second compaction folds the summary before it with the turns since
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client prompts "say two" as turn "t3"
    And the client prompts "/compact" as turn "t4"
    Then the engine was last asked to fold "say two" after the summary "summary: say one => one"
    And in the answer of turn "t4", "_meta.lembas.summary" is "summary: earlier: summary: say one => one | say two => two"
    When the client prompts "say three" as turn "t5"
    Then the engine started turn "t5" with the summary "summary: earlier: summary: say one => one | say two => two" and the earlier turns "nothing"

  Scenario: With nothing to fold, /compact says so and runs nothing
    Given a client with a session on the device
    When the client prompts "/compact" as turn "t1"
    Then the engine was asked 0 compactions
    And in the answer of turn "t1", "_meta.lembas.message" is "nothing to compact: the model is given no earlier turn of this session"
    And in the answer of turn "t1", "_meta.lembas.command" is "compact"
    And the link carried no "compacted" event

  Scenario: The summary outlives a restart, and the folded turns stay folded
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client prompts "say two" as turn "t3"
    And the device restarts from its store
    And the client prompts "say three" as turn "t4"
    Then the engine started turn "t4" with the summary "summary: say one => one" and the earlier turns "say two"

  Scenario: A summary over the bound is cut, and the cut is said
    Given the device keeps summaries of at most 12 bytes
    And a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    Then in the answer of turn "t2", "_meta.lembas.summary" is "summary: say"
    And the link carried the event {"type":"notice","text":"the summary was cut to 12 of its 23 bytes (sessions.max_summary_bytes)"}

  Scenario: _lembas/session/compact answers the summary
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client compacts the session
    Then the call is answered with exactly {"summary":"summary: say one => one"}
    And the link carried the event {"type":"compacted","summary":"summary: say one => one"}
    When the client prompts "say two" as turn "t2"
    Then the engine started turn "t2" with the summary "summary: say one => one" and the earlier turns "nothing"

  Scenario: _lembas/session/compact with nothing to fold is refused
    Given a client with a session on the device
    When the client compacts the session
    Then the call is answered with the error -32602, saying "has no earlier turn the model is given, so nothing to compact"

  Scenario: _lembas/session/compact while the session works is refused
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "sleep 60000\nsay late" as turn "t2"
    And the client compacts the session
    Then the call is answered with the error -32602, saying "is working: compact it once its turns are done"
