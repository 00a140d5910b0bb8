Feature: A session runs on the model the client named, and on no other
  Spec, "How the device names an instance's models": the served id is the device's ref, and
  the older `<connection>/<id>` form names the same model. "The chat's model, full stop": a
  session opened with `lembas_model` runs on that model, `instance: true`; one the device
  cannot speak to fails with -32602 and the reason, and the device never falls back.
  `_lembas/configure` changes model or effort between prompts and emits a `model` event; while
  a turn runs, or for a model that cannot be served, -32602 and the session keeps its model.
  Capabilities `model` and `configure` are listed once they work: when the device has models.
  The device's list follows the instance's: a change that lists or unlists them restarts the
  link (1012), any other keeps it; a session whose model went has its next prompt refused.

  Background:
    Given a device whose remote work is on over "/home/dev/work"
    And the device trusts "/home/dev/work"
    And the device is logged in as "home" to an instance serving "deepseek/flash, qwen/coder"

  Scenario: A lembas_model session runs on exactly that model, served by the instance
    Given the device and the client have completed the handshake
    When the client opens a session in "/home/dev/work/app" on the instance's model "qwen/coder"
    Then the call is answered with a result where "_meta.lembas.model" is "qwen/coder"
    And the call is answered with a result where "_meta.lembas.instance" is true

  Scenario: A lembas_model the instance does not serve is refused, and no session is made
    Given the device and the client have completed the handshake
    When the client opens a session in "/home/dev/work/app" on the instance's model "other/model"
    Then the call is answered with the error -32602, saying "model `other/model` is not one this device can speak to"
    And the device has no session

  Scenario: The older <connection>/<id> form names the same model
    Given the device and the client have completed the handshake
    When the client opens a session in "/home/dev/work/app" on the instance's model "home/qwen/coder"
    Then the call is answered with a result where "_meta.lembas.model" is "qwen/coder"
    And the call is answered with a result where "_meta.lembas.instance" is true

  Scenario: Configure changes model and effort, and a model event follows
    Given a client with a session on the device
    When the client configures the session with {"model": "qwen/coder", "effort": "high"}
    Then the call is answered with exactly {"model": "qwen/coder", "effort": "high"}
    And the link carried the event {"type": "model", "ref": "qwen/coder", "effort": "high", "connection": "home", "instance": true}
    When the client prompts "say hi" as turn "t1"
    Then the engine started turn "t1" on the model "qwen/coder" with the effort "high"

  Scenario: Configure while a turn runs is refused, and the model stays
    Given a client with a session on the device
    When the client prompts "sleep 5000\nsay done" as turn "t1"
    And the client configures the session with {"model": "qwen/coder"}
    Then the call is answered with the error -32602, saying "a turn runs or waits in session"
    And the link carried no "model" event
    When 6 seconds pass
    And the client prompts "say hi" as turn "t2"
    Then the engine started turn "t2" on the model "deepseek/flash" with the effort null

  Scenario: Configure to a model the instance does not serve is refused, and the model stays
    Given a client with a session on the device
    When the client configures the session with {"model": "other/model", "effort": "low"}
    Then the call is answered with the error -32602, saying "model `other/model` is not one this device can speak to"
    And the link carried no "model" event
    When the client prompts "say hi" as turn "t1"
    Then the engine started turn "t1" on the model "deepseek/flash" with the effort null

  Scenario: An effort that is not a level or off is refused, naming the levels
    Given a client with a session on the device
    When the client configures the session with {"effort": "max"}
    Then the call is answered with the error -32602, saying "effort `max` is not one of off, minimal, low, medium, high, xhigh"

  Scenario: With models, model and configure are listed
    Given the device and the client have completed the handshake
    Then the client was listed "model"
    And the client was listed "configure"

  Scenario: With no models, neither model nor configure is listed
    Given the device is logged in to no instance that serves it models
    And the device and the client have completed the handshake
    Then the client was not listed "model"
    And the client was not listed "configure"

  Scenario: A new model list keeps the link; a session whose model went is refused its next prompt
    Given a client with a session on the device
    When the instance's models become "qwen/coder, mistral/large"
    Then the device has not closed the link
    When the client prompts "say hi" as turn "t1"
    Then turn "t1" is refused with the error -32602, saying "runs on model `deepseek/flash`, which the instance no longer serves"
    And the engine started no turn
    When the client configures the session with {"model": "home/large"}
    Then the call is answered with exactly {"model": "mistral/large", "effort": null}
    When the client prompts "say hi" as turn "t2"
    Then the engine started turn "t2" on the model "mistral/large" with the effort null

  Scenario: A list that leaves no models restarts the link, which lists neither model nor configure
    Given the device and the client have completed the handshake
    When the instance serves the device no models any more
    Then the device closes the link with 1012, naming "settings changed"
    And the client is ready
    And the client was not listed "model"
    And the client was not listed "configure"
