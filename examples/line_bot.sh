#!/bin/sh
# A bot in shell with jq for `wizard-arena play --cmd "sh examples/line_bot.sh"`: each turn
# comes as one JSON line on stdin, the first legal move goes back as one JSON line on stdout,
# and what it writes to stderr is kept with the move for its owner (README: "Bots in any language").
while IFS= read -r line; do
  move=$(printf '%s\n' "$line" | jq -c '.match.legalMoves[0] | with_entries(select(.value != null))')
  printf '%s\n' "$line" | jq -r --arg move "$move" '"\(.type) round \(.match.round) \(.match.phase): \($move)"' >&2
  printf '%s\n' "$move"
done
