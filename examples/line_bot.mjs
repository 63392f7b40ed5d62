// A bot in JavaScript for `wizard-arena play --cmd "node examples/line_bot.mjs"`: each turn
// comes as one JSON line on stdin, the move goes back as one JSON line on stdout, and what it
// writes to stderr is kept with the move for its owner (README: "Bots in any language").
// No npm packages: node's readline only.
import { createInterface } from 'node:readline';

for await (const line of createInterface({ input: process.stdin })) {
  const { type, match, message } = JSON.parse(line); // type: "turn", or "error" with the turn again
  const legal = match.legalMoves.map((m) => Object.fromEntries(Object.entries(m).filter(([, v]) => v !== null)));
  // bid the Wizards in hand when that bid is allowed; else, and for cards and trump, the first legal move
  const wizards = (match.hand ?? []).filter((card) => card.startsWith('W')).length; // no hand: CLAIRVOYANCE round 1
  const move = legal.find((m) => m.bid === wizards) ?? legal[0];
  console.error(`${type} round ${match.round} ${match.phase}: ${JSON.stringify(move)}${message ? ` after: ${message}` : ''}`);
  console.log(JSON.stringify(move));
}
