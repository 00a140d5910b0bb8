Feature: Cards: the first answer decides, and every other copy is taken down
  Spec, "_lembas/question" and "_lembas/plan" ("first answer wins"), "session/request_permission"
  and "_lembas/permission/settled": in a session a terminal shares, a card goes to the web and
  the terminal at once (`patient: true`); whichever answers first decides and the other card is
  taken down. No answer within `remote.approval_timeout` is a denial. Questions and plans go only
  to a client that said protocol 2 or later, never to one that refused one with -32601, and never
  to an editor (the engine is told nobody can be asked). A card open when the link drops is
  offered again, with its toolCallId, on the next link.

  Background:
    Given a client with a session on the device

  Scenario: The terminal answers first: its answer decides, and the web's card is settled
    Given a terminal on the device whose initialize said "lembas": {"protocol": 3}
    And the terminal shares the session
    When the client prompts "permit deploy" as turn "t1"
    Then the web and the terminal were both asked "session/request_permission" for one toolCallId, as patient
    When the terminal answers the card with the option "deny"
    Then exactly one decision reached the engine: "deny"
    And the link carried "_lembas/permission/settled" for the card, naming the session
    And the client took the card down
    And turn "t1" is answered with the stop reason "end_turn"
    And the engine said "denied"

  Scenario: The web answers first: its answer decides, and the terminal's card is settled
    Given a terminal on the device whose initialize said "lembas": {"protocol": 3}
    And the terminal shares the session
    When the client prompts "permit deploy" as turn "t1"
    And the web answers the card with the option "once"
    Then exactly one decision reached the engine: "allow once"
    And the terminal was sent "_lembas/permission/settled" for the card
    And the link carried 0 "_lembas/permission/settled"
    And the engine said "allowed"

  Scenario: The web and the terminal answer at the same instant: exactly one decides
    Given a terminal on the device whose initialize said "lembas": {"protocol": 3}
    And the terminal shares the session
    When the client prompts "permit deploy" as turn "t1"
    And the web and the terminal answer the card at the same instant, with "once" and "deny"
    And 1 second passes
    Then exactly one decision reached the engine
    And turn "t1" is answered with the stop reason "end_turn"

  Scenario: No answer within the approval timeout denies the card, and settles it
    When the client prompts "permit deploy" as turn "t1"
    And 4 minutes pass
    Then no decision has reached the engine
    When 1 minute passes
    Then exactly one decision reached the engine: "deny (timed out)"
    And the link carried "_lembas/permission/settled" for the card, naming the session
    And the client took the card down
    And turn "t1" is answered with the stop reason "end_turn"

  Scenario: A protocol 1 client sharing the session is not sent a question; the web is
    Given a terminal on the device whose initialize said "lembas": true
    And the terminal shares the session
    When the client prompts "ask Which database? | SQLite | Postgres" as turn "t1"
    Then the link carried 1 "_lembas/question"
    And the terminal was sent no "_lembas/question"
    And no decision has reached the engine

  Scenario: A protocol 1 client is never sent a question or a plan: the engine hears nobody can be asked
    Given a terminal on the device whose initialize said "lembas": true
    And the terminal opens a session of its own in "/home/dev/work/tui"
    When the terminal prompts "ask Which database? | SQLite | Postgres\nplan Ship it" as turn "p1"
    Then the terminal was sent no "_lembas/question"
    And the terminal was sent no "_lembas/plan"
    And the decisions that reached the engine are "nobody to ask", "nobody to ask"
    And the terminal's prompt of turn "p1" is answered with the stop reason "end_turn"

  Scenario: An editor is never sent a question or a plan: the engine hears nobody can be asked
    Given an editor on stdio that said nothing of lembas, with a session in "/srv/elsewhere"
    When the editor prompts "ask Which database? | SQLite | Postgres\nplan Ship it" as turn "e1"
    Then the editor was sent no "_lembas/question"
    And the editor was sent no "_lembas/plan"
    And the decisions that reached the engine are "nobody to ask", "nobody to ask"
    And the editor's prompt of turn "e1" is answered with the stop reason "end_turn"

  Scenario: A client that answers a question with -32601 is sent no more questions or plans on that link
    When the client prompts "ask Which database? | SQLite | Postgres" as turn "t1"
    Then the link carried 1 "_lembas/question"
    When the web answers the card with the error -32601
    Then the decisions that reached the engine are "nobody to ask"
    When the client prompts "ask Which cache? | none | Redis\nplan Ship it" as turn "t2"
    Then the link carried 1 "_lembas/question"
    And the link carried 0 "_lembas/plan"
    And the decisions that reached the engine are "nobody to ask", "nobody to ask", "nobody to ask"

  Scenario: A card open when the link drops is offered again with its toolCallId, and decided once
    When the client prompts "permit deploy" as turn "t1"
    And the link is cut
    And 5 seconds pass
    Then the web was asked "session/request_permission" 2 times, with the same toolCallId
    And no decision has reached the engine
    When the web answers the card with the option "session"
    Then exactly one decision reached the engine: "allow always"
    And turn "t1" is answered with the stop reason "end_turn"
