#!/bin/bash
# probe.sh PATH [TOKEN [once]]: GET $FILEPATH_API_URL$PATH from inside an
# agent container, with TOKEN as a bearer token, retrying refused
# connections for about 10 s (once: a single try). Prints "STATUS BODY", or
# "refused".
hp=${FILEPATH_API_URL#http://}
tries=1000
[ "${3:-}" = once ] && tries=1
for ((i = 0; i < tries; i++)); do
	{ exec 3<>"/dev/tcp/${hp%:*}/${hp##*:}"; } 2>/dev/null && break
	sleep 0.01
done
if ((i == tries)); then echo refused; exit 0; fi
auth=
[ -n "${2:-}" ] && auth="Authorization: Bearer $2"$'\r\n'
printf 'GET %s HTTP/1.0\r\nHost: %s\r\n%s\r\n' "$1" "$hp" "$auth" >&3
IFS=' ' read -r _ status _ <&3
while IFS= read -r h <&3 && [ -n "${h%$'\r'}" ]; do :; done
echo "$status $(cat <&3)"
