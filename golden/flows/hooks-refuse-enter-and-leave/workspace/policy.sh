#!/bin/sh
# A governor: keeps every question it is asked, refuses the first clean leave of
# root.shape (forcing a retreat), refuses entering root.deploy, and fails (exit 7)
# when asked to leave root.notes.
input=$(cat)
printf '%s\n' "$input" >> hook-log.jsonl
case "$input" in
  *'"path":"root.shape"'*'"moment":"leave"'*'"attempt":1'*)
    echo '{"reason":"the specification names no owner"}'; exit 2 ;;
  *'"path":"root.deploy"'*'"moment":"enter"'*)
    echo "deploys are frozen this week" >&2; exit 2 ;;
  *'"path":"root.notes"'*'"moment":"leave"'*)
    exit 7 ;;
esac
exit 0
