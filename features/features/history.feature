Feature: A session's history, read from the store and bounded (beyond the spec in its extras)
  Spec, "_lembas/session/history": params `{ sessionId }`, result `{ sessionId, title, root,
  turns }`. Ours (issue 16): the history lives in the device's store, not in its memory, and
  one answer is bounded. It keeps the newest turns that fit `sessions.history_bytes` (512 KiB),
  cut at a turn boundary, at most `limit` (by default and at most `sessions.max_history_turns`,
  1,000), and only those before the turn index `before` (0 the session's first turn). The
  spec's fields stay as they are; `truncated` says turns were left out or one was cut, and
  `dropped` how many older turns were left out: ask again with `before` set to it for those.
  A single turn over the budget is answered alone, cut, its text saying so.

  Scenario: A history that fits is answered whole, saying nothing was left out
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client asks the session's history
    Then the history answered is "say one", "one", "say two", "two"
    And the history answered says truncated false, dropped 0

  Scenario: A limit keeps the newest turns and says how many older ones it left out
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "say three" as turn "t3"
    And the client asks the session's history, at most 3 turns
    Then the history answered is "two", "say three", "three"
    And the history answered says truncated true, dropped 3

  Scenario: Before pages back from where the last answer stopped
    Given a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the client prompts "say three" as turn "t3"
    And the client asks the session's history before turn 5, at most 2 turns
    Then the history answered is "two", "say three"
    And the history answered says truncated true, dropped 3
    When the client asks the session's history before turn 3
    Then the history answered is "say one", "one", "say two"
    And the history answered says truncated false, dropped 0

  Scenario: The byte budget keeps the newest whole turns that fit
    Given one history answer holds at most 4096 bytes
    And a client with a session on the device
    When the client prompts "chunks 1 1500" as turn "t1"
    And the client prompts "chunks 1 1500" as turn "t2"
    And the client prompts "chunks 1 1500" as turn "t3"
    And the client asks the session's history
    Then the history answered has 4 turns, within 4096 bytes
    And the history answered says truncated true, dropped 2

  Scenario: A single turn over the budget is answered alone, cut, saying so
    Given one history answer holds at most 4096 bytes
    And a client with a session on the device
    When the client prompts "say short" as turn "t1"
    And the client prompts "chunks 2 6000" as turn "t2"
    And the client asks the session's history
    Then the history answered has 1 turn, within 4096 bytes
    And the history answered's last turn says "(sessions.history_bytes): it is cut"
    And the history answered says truncated true, dropped 3

  Scenario: A limit over the most the device answers is refused, naming the bound
    Given a client with a session on the device
    When the client asks the session's history, at most 1001 turns
    Then the call is answered with the error -32602, saying "limit 1001 is over the most turns this device answers at once, 1000 (sessions.max_history_turns)"

  Scenario: The history outlives a restart and a session set aside
    Given the device keeps at most 1 session in memory
    And a client with a session on the device
    When the client prompts "say one" as turn "t1"
    And the device restarts from its store
    And the client opens 1 more session
    And the client asks the session's history
    Then the device read the session back from its store
    And the history answered is "say one", "one"
    When the client prompts "say two" as turn "t2"
    And the client asks the session's history
    Then the history answered is "say one", "one", "say two", "two"
