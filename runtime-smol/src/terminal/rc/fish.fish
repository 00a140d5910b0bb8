# lembas shell integration for fish, written to a private directory for one terminal.
#
# fish was started as a login shell (`--login`) and reads the user's configuration as usual;
# --init-command sources this file after it, before the first prompt. It marks the prompts:
#   OSC 133;A prompt start, 133;B end of prompt, 133;C before a command's output,
#   133;D;<status> after it (fish fires no preexec for an empty line), OSC 7 the directory.
# fish 4 and later write A, C and D themselves; then only B and OSC 7 come from here, so no mark
# is doubled.

status is-interactive; or return

set -g __lembas_file (status current-filename)
if test (string split -f1 . -- $version) -ge 4 2>/dev/null
    set -g __lembas_fish_marks 0
else
    set -g __lembas_fish_marks 1
end

# The working directory, percent-encoded byte by byte (unreserved ASCII and / stay), which is
# what `string escape --style=url` does.
function __lembas_osc7
    printf '\e]7;file://%s%s\a' '@LEMBAS_HOST@' (string escape --style=url -- $PWD)
end

# Wraps the user's fish_prompt (as it is now) so B follows its output.
function __lembas_wrap_prompt
    functions -q fish_prompt; or return
    functions -q __lembas_user_prompt; and functions -e __lembas_user_prompt
    functions --copy fish_prompt __lembas_user_prompt
    function fish_prompt
        __lembas_user_prompt $argv
        printf '\e]133;B\a'
    end
end

function __lembas_prompt_start --on-event fish_prompt
    # fish's own OSC 7 (for a few terminals) would double ours.
    functions -q __update_cwd_osc; and functions -e __update_cwd_osc
    __lembas_osc7
    test $__lembas_fish_marks = 1; and printf '\e]133;A\a'
    # A prompt defined since (a theme, `fish_config prompt`) loses B: wrap it again.
    if test (functions --details fish_prompt) != $__lembas_file
        __lembas_wrap_prompt
    end
end

function __lembas_preexec --on-event fish_preexec
    test $__lembas_fish_marks = 1; and printf '\e]133;C\a'
end

function __lembas_postexec --on-event fish_postexec
    set -l ret $status
    test $__lembas_fish_marks = 1; and printf '\e]133;D;%s\a' $ret
end

__lembas_wrap_prompt
