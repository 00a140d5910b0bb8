Feature: The folder chooser: _lembas/directories
  Spec, "_lembas/directories": without a path, the remote roots and every trusted directory
  inside them; with one (absolute, inside the roots), its entries. Each Dir says whether
  session/new would accept it, and why not. Only on the link; refused like session/new with
  remote work off or no roots, and for a path outside the roots.

  Background:
    Given a device whose remote work is on over "/home/dev/work"
    And the device trusts "/home/dev/work/app, /srv/elsewhere"
    And the device and the client have completed the handshake
    And the device's disk has the directories "/home/dev/work/app, /home/dev/work/.config, /home/dev/work/docs, /etc/secret"
    And "/home/dev/work/escape" is a symlink to "/etc"
    And "/home/dev/work/shortcut" is a symlink to "/home/dev/work/app"

  Scenario: Without a path, the places are the roots and the trusted directories inside them
    When the client asks for the directories
    Then the call is answered with a result where "path" is ""
    And the answer lists the places "/home/dev/work, /home/dev/work/app"
    And the answer's "/home/dev/work" is not accepted, because "not in a trusted project"
    And the answer's "/home/dev/work/app" is accepted

  Scenario: A directory's entries are its subdirectories, sorted, hidden ones included
    When the client asks for the directory "/home/dev/work"
    Then the answer lists the entries ".config, app, docs, escape, shortcut"
    And the call is answered with a result where "parent" is null
    And the call is answered with a result where "accepted" is false

  Scenario: Each entry is accepted exactly as session/new would accept it
    When the client asks for the directory "/home/dev/work"
    Then the answer's "/home/dev/work/app" is accepted
    And the answer's "/home/dev/work/shortcut" is accepted
    And the answer's "/home/dev/work/docs" is not accepted, because "remote.require_trust is on"
    And the answer's "/home/dev/work/escape" is not accepted, because "leads outside the device's roots"
    And nothing in the answer names "/etc"
    When the client opens a session in "/home/dev/work/docs"
    Then the call is answered with the error -32602, saying "not in a trusted project"

  Scenario: A subdirectory names its parent
    When the client asks for the directory "/home/dev/work/app"
    Then the call is answered with a result where "parent" is "/home/dev/work"
    And the call is answered with a result where "accepted" is true

  Scenario: Past remote.max_directory_entries the entries are cut and the cut is said
    Given the device lists at most 2 entries of a directory
    When the client asks for the directory "/home/dev/work"
    Then the answer lists the entries ".config, app"
    And the call is answered with a result where "error" is "showing the first 2 of 5 directories (remote.max_directory_entries is 2)"

  Scenario: A path outside the roots is refused and nothing is listed
    When the client asks for the directory "/etc"
    Then the call is answered with the error -32602, saying "outside the device's roots"
    When the client asks for the directory "/home/dev/work/../../../etc"
    Then the call is answered with the error -32602, saying "outside the device's roots"

  Scenario: A symlink that leads outside the roots is refused, its target never listed
    When the client asks for the directory "/home/dev/work/escape"
    Then the call is answered with the error -32602, saying "leads outside the device's roots"
    And nothing in the answer names "secret"

  Scenario: On stdio the method is refused
    When an editor opens stdio
    And the editor sends: {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
    Then the editor's initialize does not list "directories"
    When the editor sends: {"jsonrpc":"2.0","id":1,"method":"_lembas/directories","params":{}}
    Then the device answers with error -32602 and id 1

  Scenario: With remote work off, the places and every path are refused as session/new is
    When the device restarts from its store with remote work off
    And the client asks for the directories
    Then the call is answered with the error -32602, saying "remote work is off on this device"
    When the client asks for the directory "/home/dev/work"
    Then the call is answered with the error -32602, saying "remote work is off on this device"

  Scenario: With no roots, the places are refused as session/new is
    When the device restarts from its store with the roots ""
    And the client asks for the directories
    Then the call is answered with the error -32602, saying "this device allows no folder yet"
    When the client opens a session in "/home/dev/work"
    Then the call is answered with the error -32602, saying "this device allows no folder yet"
