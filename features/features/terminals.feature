Feature: Remote terminals: a login shell over the link, within the device's rules
  Spec, "_lembas/terminal/open" (and input, resize, close, output, exit): only with
  `remote.terminal: true`; `cwd` defaults to the first root and must be inside the roots;
  20-500 columns by 5-300 rows; at most four terminals a link; every terminal closes with its
  link. The device's shell here is a fake that echoes its keystrokes and ends with 129 (SIGHUP)
  when hung up.

  Background:
    Given a device whose remote work is on over "/home/dev/work"

  Scenario: A terminal opens in the first root at the size asked for
    Given the device allows terminals
    And the device and the client have completed the handshake
    Then the device listed the capabilities "terminal" and "shell"
    When the client opens a terminal with {"cols": 100, "rows": 30}
    Then the terminal opened in "/home/dev/work" at 100 by 30, with shell "bash" and integration true

  Scenario: Terminals off: not listed, and an open is refused with the rule
    Given the device and the client have completed the handshake
    Then the device did not list "terminal" or "shell"
    When the client sends on the link: {"jsonrpc":"2.0","id":7,"method":"_lembas/terminal/open","params":{}}
    Then the open was refused with -32602, saying "terminals are off on this device (remote.terminal is false)"

  Scenario Outline: An open outside the rules is refused, naming the rule and the value
    Given the device allows terminals
    And the device and the client have completed the handshake
    When the client opens a terminal with <params>
    Then the open was refused with -32602, saying "<words>"
    And no shell was started

    Examples:
      | params                             | words                                  |
      | {"cols": 19}                       | cols 19 is outside 20-500              |
      | {"cols": 501}                      | cols 501 is outside 20-500             |
      | {"rows": 4}                        | rows 4 is outside 5-300                |
      | {"rows": 301}                      | rows 301 is outside 5-300              |
      | {"cwd": "/etc"}                    | `/etc` is outside the device's roots   |
      | {"cwd": "/home/dev/work/../other"} | is outside the device's roots          |
      | {"cwd": "relative/dir"}            | is not an absolute path                |

  Scenario: A fifth terminal on one link is refused; a new link has its own four
    Given the device allows terminals
    And the device and the client have completed the handshake
    And the client has 4 terminals open
    When the client opens a terminal with {}
    Then the open was refused with -32602, saying "at most 4 terminals a link (terminals.max_per_link); this link has 4 open"
    When the link is cut
    Then every terminal was hung up
    When 120 seconds pass
    Then the client is ready
    And the client can open 4 terminals

  Scenario: Keystrokes reach the shell; its output waits a few milliseconds for more
    Given the device allows terminals
    And the device and the client have completed the handshake
    And the client has 1 terminal open
    When the client types "ls -l\r" into the terminal
    Then the client has heard no output of the terminal
    When 4 milliseconds pass
    Then the client heard the output "ls -l\r" from the terminal

  Scenario: A flood leaves in order, in frames of at most 64 KiB
    Given the device allows terminals
    And the device and the client have completed the handshake
    And the client has 1 terminal open
    When the terminal's shell writes 300000 bytes at once
    And 4 milliseconds pass
    Then the client heard all 300000 bytes, in order, in frames of at most 65536 bytes

  Scenario: Close hangs the shell up and its exit is reported
    Given the device allows terminals
    And the device and the client have completed the handshake
    And the client has 1 terminal open
    When the client closes the terminal
    Then the terminal was hung up
    And the client heard the terminal exit with code 129
