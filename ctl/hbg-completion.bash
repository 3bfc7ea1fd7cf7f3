# bash completion for hbgctl and hbgd            -*- shell-script -*-
# SPDX-License-Identifier: MIT
#
# Installed as both $(datadir)/bash-completion/completions/hbgctl and .../hbgd
# (bash-completion loads the file named after the command). The names come
# from the programs themselves, so this file does not go stale:
#   hbgctl help --list            the commands, one a line
#   hbgctl help --list COMMAND    its options: "--name[=ARG] [-x]" (no command
#                                 is `status`, which takes only the common ones)
#   hbgd --help                   "  [-x, ]--name[ ARG|[=ARG]]  help" lines
#   hbgd --completion=help        the completion modes, one a line
# Works without the bash-completion package too (compgen only).

# Files (and directories) for an option's or the command's argument.
_hbg_files() {
        local IFS=$'\n'
        COMPREPLY=($(compgen -f -- "$1"))
        compopt -o filenames 2>/dev/null
}

# The options of an hbgctl command as "--name[=ARG] [-x]" lines.
_hbgctl_opts() {
        "${COMP_WORDS[0]}" help --list "${1:-status}" 2>/dev/null
}

_hbgctl() {
        local cur=${COMP_WORDS[COMP_CWORD]} prev= verb= i w line long short
        local -a words=("${COMP_WORDS[@]:0:COMP_CWORD}") takes_arg=()
        COMPREPLY=()
        # "--socket=PA<TAB>": bash splits at '=' (COMP_WORDBREAKS)
        if [[ $cur == = ]]; then
                cur=
                prev=${COMP_WORDS[COMP_CWORD-1]}
        elif [[ ${COMP_WORDS[COMP_CWORD-1]} == = ]]; then
                prev=${COMP_WORDS[COMP_CWORD-2]}
        elif ((COMP_CWORD > 1)); then
                prev=${COMP_WORDS[COMP_CWORD-1]}
                [[ ${COMP_WORDS[COMP_CWORD-2]} == = ]] && prev=
        fi
        # Options that take an argument, of every command (the command may
        # come after them).
        local -a cmds
        mapfile -t cmds < <("${COMP_WORDS[0]}" help --list 2>/dev/null)
        for w in "${cmds[@]}"; do
                while read -r long short; do
                        [[ $long == *=* ]] || continue
                        takes_arg+=("${long%%=*}")
                        [[ -n $short ]] && takes_arg+=("$short")
                done < <(_hbgctl_opts "$w")
        done
        # The command: the first word that is neither an option nor an
        # option's argument; nargs: the words after it.
        local nargs=0
        for ((i = 1; i < ${#words[@]}; i++)); do
                w=${words[i]}
                if [[ $w == = ]]; then
                        ((i++))
                elif [[ $w == -* && $w != - ]]; then
                        [[ $w == *=* ]] && continue
                        [[ " ${takes_arg[*]} " == *" $w "* && ${words[i+1]-} != = ]] && ((i++))
                elif [[ -z $verb ]]; then
                        verb=$w
                else
                        ((nargs++))
                fi
        done
        # The argument of an option.
        if [[ -n $prev && " ${takes_arg[*]} " == *" $prev "* ]]; then
                case $prev in
                --socket | --dot) _hbg_files "$cur" ;;
                # sizes with the suffixes hbgctl takes (K, M, G)
                --heap) COMPREPLY=($(compgen -W "64M 128M 256M 512M 1G" -- "$cur")) ;;
                --window) COMPREPLY=($(compgen -W "1K 4K 16K 64K" -- "$cur")) ;;
                --output | -o | --svg) _hbg_files "$cur" ;;
                # trace: seconds to record
                --duration) COMPREPLY=($(compgen -W "1 5 10 30" -- "$cur")) ;;
                # the formats hbgctl lists (its table)
                --format) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" metrics --format=help 2>/dev/null)" -- "$cur")) ;;
                # the exporter's usual address (hbg-exporter.service)
                --listen) COMPREPLY=($(compgen -W "127.0.0.1:9464" -- "$cur")) ;;
                esac
                return 0
        fi
        if [[ $cur == -* ]]; then
                local -a opts=()
                while read -r long short; do
                        opts+=("${long%%=*}${long//[!=]/}")
                done < <(_hbgctl_opts "$verb")
                # `run -`: the graph on standard input
                [[ $verb == run && $nargs == 0 ]] && opts+=(-)
                COMPREPLY=($(compgen -W "${opts[*]}" -- "$cur"))
                [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
                return 0
        fi
        ((nargs > 0)) && return 0
        case $verb in
        "" | help) COMPREPLY=($(compgen -W "${cmds[*]}" -- "$cur")) ;;
        run)
                # one graph file, or - for standard input
                _hbg_files "$cur"
                [[ -z $cur || $cur == - ]] && COMPREPLY+=(-)
                ;;
        esac
        return 0
}
complete -F _hbgctl hbgctl

# hbgd's options with their argument's name (PATH, FILE, N, MODE), from
# its --help.
_hbgd() {
        local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} line opt arg
        local re='^(-[a-zA-Z], )?(--[a-z-]+)(\[?[ =]([A-Z]+))?'
        local -a opts=() files=()
        COMPREPLY=()
        if [[ $cur == = ]]; then
                cur=
        elif [[ $prev == = ]]; then
                prev=${COMP_WORDS[COMP_CWORD-2]}
        fi
        while read -r line; do
                [[ $line =~ $re ]] || continue
                opt=${BASH_REMATCH[2]}
                arg=${BASH_REMATCH[4]}
                case $arg in
                "") opts+=("$opt") ;;
                PATH | FILE) opts+=("$opt="); files+=("$opt") ;;
                *) opts+=("$opt=") ;;
                esac
        done < <("${COMP_WORDS[0]}" --help 2>/dev/null)
        if [[ " ${files[*]} " == *" $prev "* ]]; then
                _hbg_files "$cur"
                return 0
        fi
        case $prev in
        --completion)
                COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" --completion=help 2>/dev/null)" -- "$cur"))
                return 0
                ;;
        --threads | --clusters) return 0 ;;
        esac
        COMPREPLY=($(compgen -W "${opts[*]}" -- "$cur"))
        [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
        return 0
}
complete -F _hbgd hbgd
