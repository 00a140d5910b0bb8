# lembas shell integration for zsh, written to a private directory for one terminal.
#
# zsh was started as a login shell with ZDOTDIR pointing here, so it reads this file first. It
# gives the user's ZDOTDIR back and reads their .zshenv; zsh then reads the rest of their files
# (.zprofile, .zshrc, .zlogin, and .zlogout at exit) from their ZDOTDIR — following one their
# .zshenv sets. None of our variables remain by then. The prompt marks are installed at the
# first prompt, after all of those files, so they come after every hook the files set up:
#   OSC 133;A prompt start, 133;B end of prompt, 133;C before a command's output,
#   133;D;<status> after it (zsh runs no preexec for an empty line), OSC 7 the directory.

if [[ -n ${__LEMBAS_ZDOTDIR+x} ]]; then
    builtin export ZDOTDIR=$__LEMBAS_ZDOTDIR
    builtin unset __LEMBAS_ZDOTDIR
else
    builtin unset ZDOTDIR
fi

# Like zsh: no ZDOTDIR means HOME, and a missing or unreadable file is skipped.
[[ ! -r ${ZDOTDIR-$HOME}/.zshenv ]] || builtin source -- "${ZDOTDIR-$HOME}/.zshenv"

# The working directory, percent-encoded byte by byte (unreserved ASCII and / stay).
__lembas_osc7() {
    builtin emulate -L zsh -o no_multibyte
    builtin local s=$PWD out= c
    builtin integer i
    for ((i = 1; i <= $#s; i++)); do
        c=$s[i]
        if [[ $c == [A-Za-z0-9/._~-] ]]; then
            out+=$c
        else
            out+=%${(l:2::0:)$(([##16] #c))}
        fi
    done
    builtin printf '\e]7;file://%s%s\a' '@LEMBAS_HOST@' "$out"
}

__lembas_preexec() {
    builtin emulate -L zsh
    builtin typeset -g __lembas_ran=1
    builtin printf '\e]133;C\a'
}

# Last of precmd_functions: every precmd function sees the finished command's $?, and being last
# puts A and B back around a PS1 that hooks before us rebuilt (starship, powerlevel10k).
__lembas_precmd() {
    builtin local ret=$?
    builtin emulate -L zsh
    if [[ -n ${__lembas_ran-} ]]; then
        __lembas_ran=
        builtin printf '\e]133;D;%s\a' $ret
    fi
    __lembas_osc7
    builtin local a=$'%{\e]133;A\a%}' b=$'%{\e]133;B\a%}' p=$PS1
    p=${p#"$a"}
    p=${p%"$b"}
    PS1=$a$p$b
    # Move back to the end if a hook was added after us.
    if [[ ${precmd_functions[-1]-} != __lembas_precmd ]]; then
        precmd_functions=(${precmd_functions:#__lembas_precmd} __lembas_precmd)
    fi
    if [[ ${preexec_functions[-1]-} != __lembas_preexec ]]; then
        preexec_functions=(${preexec_functions:#__lembas_preexec} __lembas_preexec)
    fi
    return ret
}

# At the first prompt the user's files have all run: take our place at the end of the hooks and
# mark that prompt too.
__lembas_init() {
    builtin local ret=$?
    builtin emulate -L zsh
    builtin typeset -ga precmd_functions preexec_functions
    precmd_functions=(${precmd_functions:#__lembas_init})
    builtin unfunction __lembas_init
    builtin typeset -g __lembas_ran=
    precmd_functions+=(__lembas_precmd)
    preexec_functions+=(__lembas_preexec)
    __lembas_precmd
    return ret
}

# `sched +0` runs before the first prompt, after the precmd hooks (which may rebuild PS1); without
# zsh/sched, a precmd hook added now runs before those the user's files add, and their first
# prompt may lack the marks.
if [[ -o interactive ]]; then
    if builtin zmodload zsh/sched 2>/dev/null; then
        builtin sched +0 __lembas_init
    else
        builtin typeset -ga precmd_functions
        precmd_functions+=(__lembas_init)
    fi
fi
