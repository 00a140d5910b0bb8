Feature: session/new is confined, and a prompt is bounded
  Spec, "session/new": `cwd` must be inside `remote.roots`, in a trusted project when
  `remote.require_trust`; a `lembas_model` the device cannot speak to fails, and the device
  never falls back on a model of its own; otherwise -32602 with the reason. "session/prompt":
  10 MB a block and 25 MB a prompt, decoded; over either, -32602 with a sentence.

  Scenario: A session outside the device's roots is refused, and the refusal names the roots
    Given a device whose remote work is on over "/home/dev/work, /srv/repos"
    And the device trusts "/"
    And the device and the client have completed the handshake
    When the client opens a session in "/etc"
    Then the call is answered with the error -32602, saying "`/etc` is outside the device's roots (/home/dev/work, /srv/repos)"
    And the device has no session

  Scenario: A session in a project the device does not trust is refused
    Given a device whose remote work is on over "/home/dev/work"
    And the device requires trust and trusts no project
    And the device and the client have completed the handshake
    When the client opens a session in "/home/dev/work/app"
    Then the call is answered with the error -32602, saying "`/home/dev/work/app` is not in a trusted project"
    And the device has no session

  Scenario: A session on a model the device cannot speak to is refused, with no fallback
    Given a device whose remote work is on over "/home/dev/work"
    And the device trusts "/home/dev/work"
    And the device can speak to the instance's model "lembas/default"
    And the device and the client have completed the handshake
    When the client opens a session in "/home/dev/work/app" on the instance's model "other/model"
    Then the call is answered with the error -32602, saying "model `other/model` is not one this device can speak to"
    And the device has no session

  Scenario: A block over 10 MB is refused, with the limit and its size
    Given a client with a session on the device
    When the client prompts with an image of 10500000 bytes decoded as turn "big"
    Then turn "big" is refused with the error -32602, saying "block 1 is 10500000 bytes decoded, over the limit of 10000000 bytes a block"
    And the engine started no turn

  Scenario: A prompt over 25 MB is refused, with the limit and its size
    Given a client with a session on the device
    When the client prompts with 3 text blocks of 9000000 bytes each as turn "big"
    Then turn "big" is refused with the error -32602, saying "(27000000 bytes so far), over the limit of 25000000 bytes a prompt"
    And the engine started no turn
