#!/bin/sh
# A before-call hook that only records it was asked: it is asked after the approver
# said yes, never about a call the approver refused.
input=$(cat)
printf 'before-call %s\n' "$input" >> approvals.jsonl
exit 0
