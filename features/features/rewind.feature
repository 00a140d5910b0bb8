Feature: _lembas/session/rewind: a turn and every later one reverted
  Spec, "_lembas/session/rewind" (capability `rewind`): the client edits or regenerates from
  a turn; the device marks that turn's messages and every later one as reverted, so they leave
  the conversation the model sees and the history, answers `{ reverted: <turns> }`, and touches
  no file. A turn already folded into a compaction summary stays in the summary. `-32602` for a
  turn the session does not have, or while the session works. The reverting is stored: it
  outlives a restart.

  Scenario: A rewind reverts the turn and every later one, in the history and the model's context
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "say three" as turn "t3"
    And the client rewinds the session to turn "t2"
    Then the call is answered with exactly {"reverted":2}
    When the client asks the session's history
    Then the history answered is "say one", "one"
    When the client prompts "say four" as turn "t4"
    Then the engine started turn "t4" with the summary "none" and the earlier turns "say one"
    When the client asks the session's history
    Then the history answered is "say one", "one", "say four", "four"

  Scenario: The reverting outlives a restart
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client rewinds the session to turn "t2"
    And the device restarts from its store
    And the client prompts "say three" as turn "t3"
    Then the engine started turn "t3" with the summary "none" and the earlier turns "say one"
    When the client asks the session's history
    Then the history answered is "say one", "one", "say three", "three"

  Scenario: A reverted turn's id still gets its answer, and is not rewound to twice
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client rewinds the session to turn "t1"
    Then the call is answered with exactly {"reverted":1}
    When the client prompts "say again" as turn "t1"
    Then the engine started turn "t1" once
    When the client rewinds the session to turn "t1"
    Then the call is answered with the error -32602, saying "has no turn `t1` to rewind to"

  Scenario: A turn the session does not have is refused
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client rewinds the session to turn "nope"
    Then the call is answered with the error -32602, saying "has no turn `nope` to rewind to: it is not one of its last 200 turns (sessions.ledger_turns), was reverted already, or was an action such as /compact"

  Scenario: An action's turn is no turn to rewind to
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client rewinds the session to turn "t2"
    Then the call is answered with the error -32602, saying "has no turn `t2` to rewind to"

  Scenario: A rewind while the session works is refused
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "sleep 60000\nsay late" as turn "t2"
    And the client rewinds the session to turn "t1"
    Then the call is answered with the error -32602, saying "is working: rewind it once its turns are done"

  Scenario: A turn folded into a summary stays in the summary
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "/compact" as turn "t2"
    And the client prompts "say two" as turn "t3"
    And the client rewinds the session to turn "t1"
    Then the call is answered with exactly {"reverted":2}
    When the device restarts from its store
    And the client prompts "say three" as turn "t4"
    Then the engine started turn "t4" with the summary "summary: say one => one" and the earlier turns "nothing"
    When the client asks the session's history
    Then the history answered is "say three", "three"
