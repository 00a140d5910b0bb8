Feature: Sessions in memory are bounded; one set aside is opened from the store when named
  Spec, "session/new": "The id is the device's store id and lasts: a session the client names
  later that is not in memory is opened from the store under the same rules." The device keeps at
  most `sessions.max_live` sessions in memory: past it the least recently used idle one leaves
  memory (its store record, ledger and history stay), or, where none can, `session/new` is
  refused with -32602 naming the limit and its value.

  Scenario: A session set aside is opened from the store, and its turn is not run again
    Given the device keeps at most 2 sessions in memory
    And a client with a session on the device
    When the client prompts "hello" as turn "t1"
    And the client opens 2 more sessions
    Then the device has 3 sessions, 2 of them in memory
    When the client prompts "hello" as turn "t1"
    Then the device read the session back from its store
    And the 2 prompts of turn "t1" were answered, each once, with the same result
    And the engine started turn "t1" once
    And the device has 3 sessions, 2 of them in memory

  Scenario: The status of a session set aside still says what it last finished
    Given the device keeps at most 1 session in memory
    And a client with a session on the device
    When the client prompts "hello" as turn "t1"
    And the client opens 1 more session
    And the client asks the session's status
    Then the device read the session back from its store
    And the call is answered with a result where "lastTurnId" is "t1"

  Scenario: Where no session can be set aside, session/new is refused naming the limit
    Given the device keeps at most 1 session in memory
    And a client with a session on the device
    When the client prompts "sleep 60000" as turn "t1"
    And the client opens a session in "/home/dev/work/b"
    Then the call is answered with the error -32602, saying "the limit of 1 (sessions.max_live)"
    And the device has 1 session, 1 of them in memory
