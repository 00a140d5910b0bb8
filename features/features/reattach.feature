Feature: Reattaching a turn left incomplete by a dropped link
  Spec, "_lembas/session/status": reattaching after a dropped link, for an incomplete row with
  turn T: T running, follow it; T queued, wait, and follow it when it starts; T done, import it
  from `history`; T unknown, send the prompt again (the device deduplicates).

  Background:
    Given a client with a session on the device

  Scenario: A turn still running is followed, and its answer comes once
    When the client prompts "sleep 60000\nsay the end" as turn "t1"
    And the link is cut
    And 5 seconds pass
    Then the client is ready
    And the client reattached turn "t1" by following it
    When 60 seconds pass
    Then turn "t1" is answered with the stop reason "end_turn"
    And the client was told the answer of turn "t1" once
    And the engine started turn "t1" once

  Scenario: A turn waiting behind another is waited for, then followed
    When the client prompts "sleep 60000\nsay one" as turn "t1"
    And the client prompts "say two" as turn "t2"
    And the link is cut
    And 5 seconds pass
    Then the client reattached turn "t2" by waiting for it
    And the engine has not started turn "t2"
    When 60 seconds pass
    Then turn "t2" is answered with the stop reason "end_turn"
    And the client was told the answer of turn "t2" once
    And the engine started turn "t2" once

  Scenario: A turn that finished while the link was down is imported from the history
    When the client prompts "sleep 1000\nsay the end" as turn "t1"
    And the instance becomes unreachable
    And the link is cut
    And 2 seconds pass
    Then the device holds turn "t1" as done
    When the instance becomes reachable again
    And 2 minutes pass
    Then the client is ready
    And the client reattached turn "t1" by importing it, with the assistant's text "the end"
    And the client was never told an answer of turn "t1"
    And the engine started turn "t1" once

  Scenario: A prompt the device never received is sent again
    When the client's prompt "say hi" as turn "t1" is lost on the way to the device
    And the link is cut
    And 5 seconds pass
    Then the client reattached turn "t1" by sending it again
    And turn "t1" is answered with the stop reason "end_turn"
    And the client was told the answer of turn "t1" once
    And the engine started turn "t1" once
