// A bot in JavaScript: a random legal move whenever one of its matches waits for it. Turns
// come from the myTurns subscription and moves go back on the same WebSocket, through
// graphql-ws, the reference client of graphql-transport-ws.
//   npm ci && WIZARD_ARENA_URL=http://localhost:8000 WIZARD_ARENA_TOKEN=wza_… node bot.mjs
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const client = createClient({
  url: `${process.env.WIZARD_ARENA_URL || 'http://localhost:8000'}/graphql`.replace(/^http/, 'ws'),
  connectionParams: { token: process.env.WIZARD_ARENA_TOKEN },
  webSocketImpl: WebSocket,
  retryAttempts: Infinity, // reconnects after a dropped connection; myTurns resends what waits
});

const TURNS = 'subscription { myTurns { id version phase legalMoves { bid card trump } } }';
const MOVE = `mutation ($m: ID!, $move: MoveInput!, $v: Int) {
  submitMove(matchId: $m, move: $move, expectedVersion: $v) { version } }`;

for await (const { data, errors } of client.iterate({ query: TURNS })) {
  if (errors) throw new Error(JSON.stringify(errors));
  const turn = data.myTurns;
  const legal = turn.legalMoves[Math.floor(Math.random() * turn.legalMoves.length)];
  const move = Object.fromEntries(Object.entries(legal).filter(([, value]) => value !== null));
  for await (const answer of client.iterate({ query: MOVE, variables: { m: turn.id, move, v: turn.version } })) {
    // a refused move (STALE_VERSION after a timeout, say) changed nothing: wait for the next turn
    console.log(turn.id, turn.phase, JSON.stringify(move), answer.errors?.[0].extensions.code ?? 'played');
  }
}
