Feature: The link's handshake: _lembas/hello, then initialize
  The device dials out to its instance. On a new link it speaks first, with `_lembas/hello`
  (spec: "_lembas/hello — agent → client": sent once when the link opens, before
  `initialize`); the client checks the protocol and initializes, saying it is LLeMbas and
  which protocol it speaks (spec: "Versions and discovery", "initialize").

  Scenario: The device greets the link with a protocol 3 hello, and the client initializes
    Given a device whose remote work is on over "/home/dev/work, /srv/repos"
    And the device runs on host "devbox", platform "linux"
    When the device links to the instance
    Then the first frame the device sends on the link is a "_lembas/hello" notification
    And in the hello, "params.protocol" is 3
    And in the hello, "params.harness_spec" is "3.0.0"
    And in the hello, "params.version" is this build's version
    And in the hello, "params.device" is {"host": "devbox", "platform": "linux"}
    And in the hello, "params.limits" is {"roots": ["/home/dev/work", "/srv/repos"], "max_mode": "edit", "require_trust": true}
    And the first frame the client sends on the link is an "initialize" request, after the hello arrived
    And in the initialize request, "params.clientCapabilities._meta.lembas.protocol" is 3
    And in the initialize answer, "result.agentInfo.name" is "LLeMbas CLI"
    And in the initialize answer, "result._meta.lembas.protocol" is 3
    And in the initialize answer, "result._meta.lembas.harness_spec" is "3.0.0"
    And in the initialize answer, "result._meta.lembas.limits.roots" is ["/home/dev/work", "/srv/repos"]
    And in the initialize answer, "result._meta.lembas.capabilities" holds a list of strings
    And the client is ready
    And the client keeps the capabilities the initialize answer listed

  Scenario: A device with remote work off still links, and says it allows no folder
    Given a device whose remote work is off, with the roots "/home/dev/work" configured
    When the device links to the instance
    Then in the hello, "params.limits.roots" is []
    And in the initialize answer, "result._meta.lembas.limits.roots" is []
    And the client is ready

  Scenario: A device with remote work on but no roots says roots: [] too
    Given a device whose remote work is on over ""
    When the device links to the instance
    Then in the hello, "params.limits.roots" is []
    And in the initialize answer, "result._meta.lembas.limits.roots" is []
