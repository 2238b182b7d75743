#!/bin/sh
# A governor for every call point: keeps each question it is asked (and whether it
# could see the credential), refuses writes under secrets, fails (exit 5) when asked
# about deleting, withholds any result that mentions a password, and refuses a stop.
input=$(cat)
printf '%s %s key=%s\n' "$1" "$input" "${ARCHMAX_API_KEY:-unset}" >> hook-log.jsonl
case "$1:$input" in
  before:*'"file_path":"secrets.txt"'*)
    echo '{"reason":"secrets are written by the vault only"}'; exit 2 ;;
  before:*'"tool":"remove_file"'*)
    exit 5 ;;
  before:*'"command":["sh","-c","echo deploying"]'*)
    echo "no deploys on a friday" >&2; exit 2 ;;
  after:*password*)
    echo '{"reason":"the result holds a password"}'; exit 2 ;;
  stop:*)
    echo '{"reason":"the stop hook objects, and changes nothing"}'; exit 2 ;;
esac
exit 0
