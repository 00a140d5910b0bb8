Feature: Turns: a prompt never runs twice, waits its turn, and can be cancelled or steered
  Spec, "session/prompt": a prompt's `turnId` is kept with its state in a ledger of the last
  200 per session, and a prompt with a known turnId does not run again: it gets the original's
  answer, at once or when it ends; the ledger outlives a restart. A prompt that arrives while
  the session works waits its turn. "session/cancel" stops the running turn (answered
  `cancelled`); "_lembas/steer" needs a running turn, and what the turn never took in comes
  back as `unsent`.

  Background:
    Given a client with a session on the device

  Scenario: A duplicate of a finished turn gets the original answer and starts nothing
    When the client prompts "hello" as turn "t1"
    Then turn "t1" is answered with the stop reason "end_turn"
    When the client prompts "something else" as turn "t1"
    Then the 2 prompts of turn "t1" were answered, each once, with the same result
    And the engine started turn "t1" once
    And the engine was last given "hello" for turn "t1"

  Scenario: A duplicate of a running turn is answered once, with the original's answer, when it ends
    When the client prompts "say a\nsleep 1000\nsay b" as turn "t1"
    And the client prompts "say a\nsleep 1000\nsay b" as turn "t1"
    Then no prompt of turn "t1" has been answered yet
    When 1 second passes
    Then the 2 prompts of turn "t1" were answered, each once, with the same result
    And turn "t1" is answered with the stop reason "end_turn"
    And the client was told the answer of turn "t1" once
    And the engine started turn "t1" once

  Scenario: A finished turn id survives a restart of the device, from its store
    When the client prompts "hello" as turn "t1"
    Then turn "t1" is answered with the stop reason "end_turn"
    When the device restarts from its store
    Then the client is ready
    When the client prompts "hello" as turn "t1"
    Then the 2 prompts of turn "t1" were answered, each once, with the same result
    And the engine started turn "t1" once

  Scenario: The 201st turn forgets the oldest turn id, and only that one
    When the client prompts 201 turns "turn-1" to "turn-201", each answered before the next
    And the client prompts "again" as turn "turn-2"
    Then the engine started turn "turn-2" once
    When the client prompts "again" as turn "turn-1"
    Then the engine started turn "turn-1" 2 times
    And the engine was last given "again" for turn "turn-1"

  Scenario: A prompt sent while the session works waits its turn, then runs
    When the client prompts "sleep 1000\nsay one" as turn "a"
    And the client prompts "two" as turn "b"
    Then the engine has not started turn "b"
    And the device holds turn "b" as queued
    When the client asks the session's status
    Then the call is answered with a result where "queued" is ["b"]
    When 1 second passes
    Then turn "a" is answered with the stop reason "end_turn"
    And turn "b" is answered with the stop reason "end_turn"
    And the engine started turn "b" once
    And the answer of turn "a" reached the client before the answer of turn "b"

  Scenario: Cancel stops the running turn, and its prompt is answered "cancelled"
    When the client prompts "sleep 5000\nsay too late" as turn "t1"
    And the client cancels the session's turn
    Then turn "t1" is answered with the stop reason "cancelled"
    When 5 seconds pass
    Then the engine never said "too late"

  Scenario: Steer with nothing running is refused
    When the client steers the session with "also run the tests"
    Then the call is answered with the error -32602, saying "nothing runs"

  Scenario: Steered messages the turn never took in come back as unsent
    When the client prompts "sleep 1000\nsay done" as turn "t1"
    And the client steers the session with "also run the tests"
    Then the call is answered with a result where "queued" is 1
    When the client cancels the session's turn
    Then turn "t1" is answered with the stop reason "cancelled"
    And in the answer of turn "t1", "_meta.lembas.unsent" is ["also run the tests"]

  Scenario: A steered message the turn took in does not come back
    When the client prompts "sleep 1000\nsay done" as turn "t1"
    And the client steers the session with "also run the tests"
    And 1 second passes
    Then turn "t1" is answered with the stop reason "end_turn"
    And the engine said "steered: also run the tests"
    And in the answer of turn "t1", "_meta.lembas.unsent" is absent
