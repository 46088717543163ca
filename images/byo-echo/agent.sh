#!/bin/sh
# agent.sh: the smallest filepath agent, and the tutorial's starting point.
#
# A filepath agent is any program that reads one JSON input per line on
# stdin and writes one JSON event per line on stdout (FAP). This one echoes
# every message back, and answers a few commands with the other events:
#
#   /status       a status event with a context_pct
#   /tool         a tool event pair: list /workspace
#   /cmd SHELL    run SHELL in /workspace, report it as a command event pair
#   /commit       commit everything in /workspace with git, report the hash
#   /spawn NAME   ask filepath to start a child agent called NAME
#   /workers      a workers event: the children spawned so far (the UI's pills)
#   /done         finish: a done event, then exit
#
# jq builds every event, so quoting is always right. Text of any size (a
# message, a command's output) reaches jq on stdin or in a file, never as
# an argument: the kernel refuses an argument over 128 KiB ("Argument list
# too long"). Anything for humans (debugging, errors) goes to stderr, which
# filepath keeps as the node's log.
set -u

children=""   # the names /spawn asked for, one per line

emit() { jq -nc "$@"; }                                       # one event per line
say() { printf '%s' "$1" | jq -Rsc '{type: "text", content: .}'; }   # the text on stdin
status() { emit --arg s "$1" '{type: "status", state: $s}'; }
field() { printf '%s\n' "$1" | jq -r "$2 // empty"; }         # read a field of an input line

handle() {
	status thinking
	case $1 in
	/status)
		emit '{type: "status", state: "running", context_pct: 0.1}'
		;;
	/tool)
		emit '{type: "tool", name: "list", path: "/workspace", status: "start"}'
		ls -1A /workspace 2>&1 | jq -Rsc '{type: "tool", name: "list", path: "/workspace", status: "done", output: sub("\n+$"; "")}'
		;;
	"/cmd "*)
		cmd=${1#/cmd }
		emit --arg c "$cmd" '{type: "command", cmd: $c, status: "start"}'
		outfile=$(mktemp) errfile=$(mktemp)
		(cd /workspace && sh -c "$cmd") >"$outfile" 2>"$errfile"
		code=$?
		emit --arg c "$cmd" --rawfile o "$outfile" --rawfile e "$errfile" --argjson x "$code" \
			'{type: "command", cmd: $c, status: (if $x == 0 then "done" else "error" end), exit: $x,
			  stdout: ($o | sub("\n+$"; "")), stderr: ($e | sub("\n+$"; ""))}'
		rm -f "$outfile" "$errfile"
		;;
	/commit)
		cd /workspace || return
		git -c safe.directory='*' init -q 2>/dev/null
		git -c safe.directory='*' add -A
		git -c safe.directory='*' -c user.name=byo-echo -c user.email=byo-echo@filepath.local \
			commit -q --allow-empty -m "byo-echo: snapshot" >&2
		hash=$(git -c safe.directory='*' rev-parse HEAD)
		emit --arg h "$hash" '{type: "commit", hash: $h, message: "byo-echo: snapshot"}'
		cd - >/dev/null
		;;
	"/spawn "*)
		emit --arg n "${1#/spawn }" --arg a "${FILEPATH_AGENT_TYPE:-byo-echo}" --arg m "${FILEPATH_MODEL:-}" \
			'{type: "spawn", name: $n, agent: $a, model: $m, task: "Say hello to your parent."}'
		children="$children${1#/spawn }
"
		;;
	/workers)
		# This agent does not follow its children, so each is reported running.
		printf '%s' "$children" | jq -Rnc '{type: "workers", workers: [inputs | select(length > 0) | {name: ., status: "running"}]}'
		;;
	/done)
		emit '{type: "done", summary: "byo-echo finished"}'
		exit 0
		;;
	*)
		say "$1"
		;;
	esac
	status idle
}

echo "byo-echo: agent ${FILEPATH_AGENT_ID:-?} of session ${FILEPATH_SESSION_ID:-?} starting" >&2
status running
if [ -n "${FILEPATH_TASK:-}" ]; then
	handle "$FILEPATH_TASK"
else
	status idle
fi

while IFS= read -r line; do
	case $(field "$line" .type) in
	message)
		handle "$(field "$line" .content)"
		;;
	signal)
		case $(field "$line" .action) in
		stop) emit '{type: "done", summary: "stopped"}'; exit 0 ;;
		pause) status idle ;;
		resume) status running ;;
		esac
		;;
	*)
		echo "byo-echo: ignoring input: $line" >&2
		;;
	esac
done
