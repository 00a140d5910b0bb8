Feature: Deletes are never lost, and never applied twice
  Spec, "_lembas/session/delete": the session stops if it works and leaves the store; the
  client keeps a delete it could not deliver and sends it again when the device next links,
  until answered, giving up after five refusals. "_lembas/session/deleted": a delete made on the
  device while no link is up is kept, sent right after the next link's `initialize`, then
  forgotten.

  Background:
    Given a client with a session on the device

  Scenario: A delete made on the device while no link is up is sent after the next initialize, once
    When the instance becomes unreachable
    And the link is cut
    And the device deletes the session
    And 1 minute passes
    Then the link carried 0 "_lembas/session/deleted"
    When the instance becomes reachable again
    And 2 minutes pass
    Then the client is ready
    And the link carried "_lembas/session/deleted" for the session once, right after a link's initialize answer
    And the client's UI was told the session was deleted on the device
    When the link is cut
    And 2 minutes pass
    Then the client is ready
    And the link carried "_lembas/session/deleted" for the session once in all

  Scenario: A delete made on the device while no link is up survives a restart of the device
    When the instance becomes unreachable
    And the link is cut
    And the device deletes the session
    And the device restarts from its store
    And the instance becomes reachable again
    And 2 minutes pass
    Then the client is ready
    And the link carried "_lembas/session/deleted" for the session once, right after a link's initialize answer
    And the device no longer has the session, in memory or in its store

  Scenario: A client's delete is kept across three links that drop before its answer, then delivered
    When frames on the link are delayed by up to 1 second
    And the client deletes the session
    And 3 links in turn drop after the device receives the delete and before its answer arrives
    And frames on the link are no longer delayed
    And 2 minutes pass
    Then the device received the delete on 4 links, and only the last one's answer reached the client
    And the client was told the session was deleted, once
    And the client has no delete pending
    And the device no longer has the session, in memory or in its store

  Scenario: A delete refused five times is given up, and the caller is told
    Given an editor on stdio that said nothing of lembas, with a session in "/srv/elsewhere"
    When the client deletes the editor's session
    And the link is cut and comes back 4 times
    Then the device refused the delete 5 times, saying "it can only be deleted on the device"
    And the client gave the delete of the editor's session up once, with the device's reason "it can only be deleted on the device"
    And the client has no delete pending
    When the link is cut and comes back 1 time
    Then the device was sent the delete of the editor's session 5 times in all
    And the device still has the editor's session

  Scenario: Deleting a session whose turn runs stops the turn, and its prompt is answered "cancelled"
    When the client prompts "sleep 60000\nsay too late" as turn "t1"
    And the client deletes the session
    Then turn "t1" is answered with the stop reason "cancelled"
    And the client was told the session was deleted, once
    And the engine runs no turn
    And the device no longer has the session, in memory or in its store
    When 60 seconds pass
    Then the engine never said "too late"
