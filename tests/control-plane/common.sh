# shellcheck shell=bash
# Shared by up.sh and down.sh; expects $dir (the control plane's directory).
# shellcheck disable=SC2154

# The pid in DIR/NAME.pid if that process is alive and really ours (its command
# line names DIR), so a recycled pid is never mistaken for a component.
running_pid() { # name
  local pid
  pid="$(cat "$dir/$1.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$dir/" || return 1
  echo "$pid"
}
