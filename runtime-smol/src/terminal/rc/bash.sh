# lembas shell integration for bash, written to a private directory for one terminal.
#
# bash was started as a login shell (`-bash --posix`) with ENV naming this file: in posix mode
# an interactive login shell reads $ENV and nothing else. So bash stays a real login shell
# (`logout` works, ~/.bash_logout is read at exit) while this file reads the login files itself,
# in a login shell's order, and then marks the prompts:
#   OSC 133;A prompt start, 133;B end of prompt, 133;C before a command's output,
#   133;D;<status> after it (none of C/D for an empty line), OSC 7 the working directory.

# Undo what --posix did: posix mode, and inherit_errexit which turning it off leaves on.
builtin set +o posix
builtin shopt -u inherit_errexit 2>/dev/null

# Give back the user's ENV (or its absence) and bash's own HISTFILE default (posix mode picked
# ~/.sh_history), so none of our variables remain.
if [ -n "${__LEMBAS_ENV+x}" ]; then
    ENV=$__LEMBAS_ENV
    builtin unset __LEMBAS_ENV
else
    builtin unset ENV
fi
if [ -n "${__LEMBAS_HISTFILE+x}" ]; then
    HISTFILE=~/.bash_history
    builtin unset __LEMBAS_HISTFILE
fi

# A login shell's files, in its order. /etc/profile reads /etc/bash.bashrc itself when PS1 is
# set, as in a login shell, so it is read exactly once.
if [ -r /etc/profile ]; then
    . /etc/profile
fi
if [ -r ~/.bash_profile ]; then
    . ~/.bash_profile
elif [ -r ~/.bash_login ]; then
    . ~/.bash_login
elif [ -r ~/.profile ]; then
    . ~/.profile
fi

# The marks. A and B wrap PS1 inside \[ \] so readline counts them as zero-width; C and the
# "a command ran" flag come from PS0, which bash shows only when it is about to run a command
# (the unset array's subscript is arithmetic, evaluated for its assignment, and expands to
# nothing).
__lembas_mark_a='\[\e]133;A\a\]'
__lembas_mark_b='\[\e]133;B\a\]'
__lembas_mark_c='\e]133;C\a${__lembas_nil[__lembas_ran=1]-}'
__lembas_ran=
__lembas_pc_array=
__lembas_pwd=
__lembas_url=

# $1 percent-encoded byte by byte (unreserved ASCII and / stay) into __lembas_url.
__lembas_encode() {
    local LC_ALL=C s=$1 out= c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
        [A-Za-z0-9/._~-]) out+=$c ;;
        *)
            builtin printf -v c '%%%02X' "'$c"
            out+=$c
            ;;
        esac
    done
    __lembas_url=$out
}

# Runs last of PROMPT_COMMAND: bash gives every PROMPT_COMMAND entry the finished command's $?,
# and being last puts the marks back after hooks that rebuild PS1 (starship, powerline).
__lembas_prompt() {
    local status=$? cmd
    if [[ -n ${__lembas_prompt_status-} ]]; then
        # bash < 5.1: PROMPT_COMMAND is one string, whose first command saved $?.
        status=$__lembas_prompt_status
        __lembas_prompt_status=
    fi
    if [[ -n $__lembas_ran ]]; then
        __lembas_ran=
        builtin printf '\e]133;D;%s\a' "$status"
    fi
    if [[ $PWD != "$__lembas_pwd" ]]; then
        __lembas_pwd=$PWD
        __lembas_encode "$PWD"
    fi
    builtin printf '\e]7;file://%s%s\a' '@LEMBAS_HOST@' "$__lembas_url"

    local ps1=${PS1-}
    ps1=${ps1#"$__lembas_mark_a"}
    ps1=${ps1%"$__lembas_mark_b"}
    PS1=$__lembas_mark_a$ps1$__lembas_mark_b
    [[ ${PS0-} == *"$__lembas_mark_c" ]] || PS0=${PS0-}$__lembas_mark_c

    # Move back to the end if a hook was added after us.
    if [[ -n $__lembas_pc_array && ${PROMPT_COMMAND[*]: -1} != __lembas_prompt ]]; then
        local -a keep=()
        for cmd in "${PROMPT_COMMAND[@]}"; do
            [[ $cmd == __lembas_prompt ]] || keep+=("$cmd")
        done
        PROMPT_COMMAND=("${keep[@]}" __lembas_prompt)
    fi
    return "$status"
}

if ((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))); then
    __lembas_pc_array=1
    PROMPT_COMMAND+=(__lembas_prompt)
else
    PROMPT_COMMAND="__lembas_prompt_status=\$?${PROMPT_COMMAND:+
$PROMPT_COMMAND}
__lembas_prompt"
fi
