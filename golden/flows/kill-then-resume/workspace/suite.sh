# The first run dies with its caller: SIGKILL to archmax, mid-walk. Later runs pass.
echo suite >> steps.log
if [ ! -e killed.once ]; then
  : > killed.once
  kill -KILL "$PPID"
  sleep 5
fi
echo "12 passed"
