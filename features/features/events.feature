Feature: A session's event log, for a client that missed events (beyond the spec)
  Our extension (capability `events`, issue 16), not the spec's: every event the device sends
  about a session carries `_meta.lembas.seq`, one more than the last, the command set
  (`available_commands_update`) too, but the one that is part of an announce to a link not
  holding the session (commands.feature). The device keeps the session's recent events,
  bounded by `sessions.event_log_events` and `event_log_bytes`, and
  `_lembas/session/events { sessionId, since, limit? }` answers those after `since`, oldest
  first, with `next` and `truncated` (the log no longer reaches back to `since`).

  Scenario: Every event of a turn carries the next seq
    Given a client with a session on the device
    When the client prompts "say hello\ntool build\nthink done" as turn "t1"
    And 1 second passes
    Then every event of the session on the link carries a seq one more than the last

  Scenario: A client cut off mid-turn fetches exactly what it missed, in order
    Given a client with a session on the device
    When the client prompts "say before\nsleep 1000\nchunks 3 12\nsay after" as turn "t1"
    And the client notes the last seq it heard
    And the instance becomes unreachable
    And the link is cut
    And 5 seconds pass
    And the instance becomes reachable again
    And 2 minutes pass
    And the client asks the session's events since the noted seq
    Then the call is answered with a result where "truncated" is false
    And the events answered follow the noted seq one by one
    And what the link carried and the events answered say "before0000000000xx0000000001xx0000000002xxafter"

  Scenario: A log outrun says so, and keeps the newest
    Given the device keeps at most 4 events of a session
    And a client with a session on the device
    When the client prompts "say before\nsleep 1000\nchunks 10 12" as turn "t1"
    And the client notes the last seq it heard
    And the instance becomes unreachable
    And the link is cut
    And 5 seconds pass
    And the instance becomes reachable again
    And 2 minutes pass
    And the client asks the session's events since the noted seq
    Then the call is answered with a result where "truncated" is true
    And 4 events are answered

  Scenario: A page over the device's bound is refused naming it
    Given a client with a session on the device
    When the client asks the session's events since 0, at most 100000
    Then the call is answered with the error -32602, saying "sessions.max_events_page"

  Scenario: An unknown session is refused
    Given a client with a session on the device
    When the client asks the events of session "ses_nope" since 0
    Then the call is answered with the error -32602, saying "no session `ses_nope`"

  Scenario: The command set a turn changed is the session's next event, and kept in its log
    Given a client with a session on the device
    When the client notes the last seq it heard
    And a command file "commands/fix.md" appears in the project reading "Fix"
    And the client prompts "say done" as turn "t1"
    Then the last command set on the link carries the seq after the session's event before it
    When the client asks the session's events since the noted seq
    Then the events answered follow the noted seq one by one
    And the last event answered is the command set "compact, plan, undo, review, changelog, init, continue, fix"
