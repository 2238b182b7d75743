#!/bin/sh
# An approver: keeps each question (and whether it could see the credential), says yes
# to writing notes and to the test suite, no to writing the release file and to the
# deploy, and fails (exit 3) on anything else.
input=$(cat)
printf '%s key=%s\n' "$input" "${ARCHMAX_API_KEY:-unset}" >> approvals.jsonl
case "$input" in
  *'"file_path":"notes.md"'*|*'"echo 4 passed"'*) exit 0 ;;
  *'"file_path":"release.txt"'*) echo '{"reason":"releases are cut by the release manager"}'; exit 2 ;;
  *'"echo deploying"'*) echo "not during the freeze" >&2; exit 2 ;;
esac
exit 3
