// Plays one match to its end as a seated bot, through graphql-ws used as its README shows:
// the token in connectionParams, the match followed with matchUpdates until the server
// completes it, a move (the first legal one, on the same WebSocket) whenever myTurns says one
// is due. Prints one JSON line: every view seen, the moves made and those refused.
//   node play.mjs <ws url> <token> <match id>
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, matchId] = process.argv.slice(2);
const client = createClient({ url, connectionParams: { token }, webSocketImpl: WebSocket, retryAttempts: 0 });

const UPDATES = `subscription ($m: ID!) { matchUpdates(matchId: $m) {
  id version status phase mySeat awaiting winners seats { seat score timeouts } } }`;
const TURNS = 'subscription { myTurns { id version legalMoves { bid card trump } } }';
const MOVE = `mutation ($m: ID!, $move: MoveInput!, $v: Int) {
  submitMove(matchId: $m, move: $move, expectedVersion: $v) { version } }`;

/** The one result of a query or mutation sent over the WebSocket. */
function execute(query, variables) {
  return new Promise((resolve, reject) => {
    let result;
    client.subscribe({ query, variables }, {
      next: (value) => { result = value; },
      error: reject,
      complete: () => resolve(result),
    });
  });
}

const views = [];
const moves = [];
const refused = [];
let moving = Promise.resolve();
let failure = null;

const stopTurns = client.subscribe({ query: TURNS }, {
  next: ({ data, errors }) => {
    if (errors) { failure = failure ?? errors; return; }
    const turn = data.myTurns;
    if (turn.id !== matchId) return;
    const move = Object.fromEntries(Object.entries(turn.legalMoves[0]).filter(([, value]) => value !== null));
    moving = moving.then(async () => {
      const answer = await execute(MOVE, { m: matchId, move, v: turn.version });
      if (answer.errors) refused.push(answer.errors[0].extensions.code);
      else moves.push({ version: turn.version, move, after: answer.data.submitMove.version });
    });
  },
  error: (error) => { failure = failure ?? String(error); },
  complete: () => {},
});

try {
  await new Promise((resolve, reject) => {
    client.subscribe({ query: UPDATES, variables: { m: matchId } }, {
      next: ({ data, errors }) => (errors ? reject(new Error(JSON.stringify(errors))) : views.push(data.matchUpdates)),
      error: (error) => reject(error instanceof Error ? error : new Error(JSON.stringify(error))),
      complete: resolve,
    });
  });
  stopTurns();
  await moving;
} finally {
  await client.dispose();
}
console.log(JSON.stringify({ views, moves, refused, failure }));
