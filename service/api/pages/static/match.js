// The match page (/matches/{id}): draws the table from a spectator's view of the match, follows
// it live over GraphQL's matchUpdates subscription (graphql-transport-ws), and once it is over
// steps through its replay (GET /api/matches/{id}/replay), checking its seed against seedHash.
// Every name a bot chose is set as text, never as markup.
"use strict";

(() => {
  const data = JSON.parse(document.getElementById("match-data").textContent);
  const $ = (id) => document.getElementById(id);
  const clockSkewMs = data.serverNowMs - Date.now();
  let match = data.match;

  const SUITS = { B: "blue", G: "green", R: "red", Y: "yellow" };
  const SUBSCRIPTION = `subscription ($m: ID!) { matchUpdates(matchId: $m) {
    id status version round rounds handSize dealer phase trumpCard trumpSuit leadSuit toAct awaiting deadline
    seats { seat bot { id name } houseBot score bid tricks timeouts }
    currentTrick { seat card } lastTrick { leader winner plays { seat card } }
    roundResults { round seats { seat bid tricks points } } winners seedHash seed salt abortReason } }`;

  // ------------------------------------------------------------------ drawing

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  /** A card drawn as a card: rank and suit in the suit's colour; Wizards and Jesters apart. */
  function card(code, small) {
    const kind = code === "W" ? "W" : code === "J" ? "J" : code[0];
    const node = el("span", `card ${kind}${small ? " small" : ""}`);
    node.dataset.card = code;
    node.title = code === "W" ? "Wizard" : code === "J" ? "Jester" : `${code.slice(1)} of ${SUITS[kind]}`;
    node.append(el("span", "rank", code === "W" || code === "J" ? code : code.slice(1)));
    node.append(el("span", "suit", code === "W" ? "Wizard" : code === "J" ? "Jester" : SUITS[kind]));
    return node;
  }

  function cardBack(small) {
    const node = el("span", `card back${small ? " small" : ""}`);
    node.title = "a card not shown";
    return node;
  }

  function seatName(seat) {
    const holder = match.seats[seat] && match.seats[seat].bot;
    return holder ? holder.name : `seat ${seat}`;
  }

  function trickNode(plays, winner) {
    const box = el("div", "plays");
    for (const play of plays) {
      const one = el("figure", "play");
      const drawn = card(play.card);
      if (play.seat === winner) drawn.classList.add("won");
      one.append(drawn, el("figcaption", null, seatName(play.seat)));
      box.append(one);
    }
    if (!plays.length) box.append(el("span", "muted", "—"));
    return box;
  }

  /** The table: ``table`` holds a Match's fields (a live view, or a replay's frame). */
  function drawTable(table, options) {
    const seats = $("seats");
    seats.replaceChildren();
    const acting = new Set(table.toAct !== null && table.toAct !== undefined ? [table.toAct] : table.awaiting || []);
    const inTrick = new Set((table.currentTrick || []).map((p) => p.seat));
    const tricksDone = table.seats.reduce((sum, s) => sum + (s.tricks || 0), 0);  // this round's, one winner each
    for (const seat of table.seats) {
      const box = el("article", "seat");
      box.dataset.seat = seat.seat;
      if (acting.has(seat.seat) && table.phase !== "FINISHED") box.classList.add("to-act");
      if (match.winners && match.winners.includes(seat.seat) && table.phase === "FINISHED") box.classList.add("winner");
      const head = el("header");
      const holder = match.seats[seat.seat] && match.seats[seat.seat].bot;
      if (holder && !match.seats[seat.seat].houseBot) {
        const link = el("a", "name", holder.name);
        link.href = `/bots/${encodeURIComponent(holder.id)}`;
        head.append(link);
      } else {
        head.append(el("span", "name", holder ? holder.name : "empty seat"));
      }
      if (seat.seat === table.dealer) head.append(el("span", "tag", "dealer"));
      box.append(head);
      const figures = el("dl", "figures");
      const timeouts = match.seats[seat.seat] ? match.seats[seat.seat].timeouts : 0;
      for (const [label, value] of [
        ["bid", seat.bid === null || seat.bid === undefined ? "–" : seat.bid],
        ["tricks", seat.tricks],
        ["score", seat.score],
        ["timeouts", timeouts],
      ]) {
        figures.append(el("dt", null, label), el("dd", `v-${label}`, value));
      }
      box.append(figures);
      const hand = el("div", "hand");
      if (seat.hand && seat.hand.length) {
        for (const code of seat.hand) hand.append(card(code, true));
      } else if (!options.replay && table.phase !== "FINISHED" && match.status === "ACTIVE") {
        // a spectator sees no card of a live hand: only how many are left
        const left = (table.handSize || 0) - tricksDone - (inTrick.has(seat.seat) ? 1 : 0);
        for (let i = 0; i < left; i += 1) hand.append(cardBack(true));
      }
      box.append(hand);
      seats.append(box);
    }
    const trump = $("trump");
    trump.replaceChildren();
    if (table.trumpCard) trump.append(card(table.trumpCard));
    trump.append(el("p", "muted", table.trumpSuit ? `trump: ${table.trumpSuit.toLowerCase()}`
      : table.phase === "CHOOSE_TRUMP" ? "the dealer chooses trump" : "no trump"));
    $("trick").replaceChildren(trickNode(table.currentTrick || [], null));
    const last = table.lastTrick;
    $("last-trick").replaceChildren(last ? trickNode(last.plays, last.winner) : trickNode([], null));
    if (last) $("last-trick").append(el("p", "muted", `won by ${seatName(last.winner)}`));
  }

  /** The round table: bids against tricks and points, per round and seat. */
  function drawRounds(results) {
    const table = $("rounds");
    table.replaceChildren();
    const head = el("tr");
    head.append(el("th", null, "round"));
    for (const seat of match.seats) head.append(el("th", "num", seatName(seat.seat)));
    const thead = el("thead");
    const body = el("tbody");
    thead.append(head);
    table.append(thead, body);
    const totals = match.seats.map(() => 0);
    for (const result of results) {
      const row = el("tr");
      row.append(el("td", null, result.round));
      for (const seat of result.seats) {
        totals[seat.seat] += seat.points;
        const cell = el("td", `num ${seat.bid === seat.tricks ? "made" : "missed"}`);
        cell.title = `bid ${seat.bid}, took ${seat.tricks}: ${seat.points > 0 ? "+" : ""}${seat.points}`;
        cell.append(el("span", "bid-tricks", `${seat.bid}/${seat.tricks}`), " ",
          el("span", "points", `${seat.points > 0 ? "+" : ""}${seat.points}`), " ",
          el("strong", "total", totals[seat.seat]));
        row.append(cell);
      }
      body.append(row);
    }
    if (!results.length) {
      const row = el("tr");
      const cell = el("td", "empty", "No round has ended yet.");
      cell.colSpan = match.seats.length + 1;
      row.append(cell);
      body.append(row);
    }
  }

  function drawStatus() {
    const status = $("status");
    status.textContent = match.status;
    status.className = `tag ${match.status}`;
  }

  // ------------------------------------------------------------------ live

  function drawLive() {
    $("table").dataset.version = String(match.version);
    drawStatus();
    drawTable(match, { replay: false });
    drawRounds(match.roundResults);
    drawTurn();
  }

  /** Who is to act, and a countdown to their deadline by the server's clock. */
  function drawTurn() {
    const turn = $("turn");
    if (match.status === "WAITING") {
      turn.textContent = `Waiting for players: ${match.seats.filter((s) => !s.bot).length} seat(s) free.`;
      return;
    }
    if (match.status !== "ACTIVE") {
      const winners = (match.winners || []).map(seatName).join(", ");
      turn.textContent = match.status === "FINISHED" ? `Finished. Won by ${winners}.`
        : `The match was aborted${match.abortReason ? `: ${match.abortReason}` : "."}`;
      return;
    }
    const seats = match.toAct !== null ? [match.toAct] : match.awaiting;
    const who = seats.map(seatName).join(", ");
    const verb = { CHOOSE_TRUMP: "chooses trump", BID: "bids", PLAY: "plays" }[match.phase] || "acts";
    let left = "";
    if (match.deadline) {
      const ms = Math.max(0, Date.parse(match.deadline) - (Date.now() + clockSkewMs));
      left = ` · ${(ms / 1000).toFixed(1)} s left`;
    }
    turn.textContent = `Round ${match.round} of ${match.rounds}: ${who} ${verb}${left}`;
  }

  function follow() {
    let retryMs = 500;
    const connect = () => {
      const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`;
      const socket = new WebSocket(url, "graphql-transport-ws");
      let done = false;
      socket.onopen = () => socket.send(JSON.stringify({ type: "connection_init", payload: {} }));
      socket.onmessage = (event) => {
        const message = JSON.parse(event.data);
        if (message.type === "connection_ack") {
          retryMs = 500;
          socket.send(JSON.stringify({ id: "match", type: "subscribe", payload: { query: SUBSCRIPTION, variables: { m: match.id } } }));
        } else if (message.type === "ping") {
          socket.send(JSON.stringify({ type: "pong" }));
        } else if (message.type === "next" && message.payload.data) {
          const next = message.payload.data.matchUpdates;
          if (next.version >= match.version) {
            match = next;
            drawLive();
          }
        } else if (message.type === "error") {
          $("turn").textContent = `Cannot follow this match: ${message.payload.map((e) => e.message).join("; ")}`;
          done = true;
        } else if (message.type === "complete") {
          done = true;
          socket.close(1000);
          if (match.status === "FINISHED") startReplay();
        }
      };
      socket.onclose = () => {
        if (done) return;
        setTimeout(connect, retryMs);  // the server restarted, or the network went: again, slower each time
        retryMs = Math.min(retryMs * 2, 10000);
      };
    };
    connect();
    setInterval(() => { if (match.status === "ACTIVE") drawTurn(); }, 100);
  }

  // ------------------------------------------------------------------ replay

  const replay = { frames: [], index: 0, timer: null, roundStarts: [] };

  async function startReplay() {
    const answer = await fetch(`/api/matches/${encodeURIComponent(match.id)}/replay`);
    const body = await answer.json();
    if (!answer.ok) {
      $("turn").textContent = `No replay: ${body.error ? body.error.message : answer.status}`;
      return;
    }
    match = body.match;
    replay.frames = body.frames;
    replay.roundStarts = [];
    body.frames.forEach((frame, i) => {
      if (!replay.roundStarts[frame.round - 1] && frame.phase !== "FINISHED") replay.roundStarts[frame.round - 1] = i;
    });
    const rounds = $("replay-round");
    rounds.replaceChildren();
    replay.roundStarts.forEach((_, r) => {
      const option = el("option", null, `${r + 1}`);
      option.value = String(r + 1);
      rounds.append(option);
    });
    const position = $("replay-position");
    position.max = String(replay.frames.length - 1);
    $("replay-controls").hidden = false;
    drawStatus();
    checkSeed();
    show(replay.frames.length - 1);
  }

  function show(index) {
    replay.index = Math.max(0, Math.min(index, replay.frames.length - 1));
    const frame = replay.frames[replay.index];
    drawTable(frame, { replay: true });
    drawRounds(match.roundResults.slice(0, frame.results));
    $("replay-position").value = String(replay.index);
    $("replay-round").value = String(Math.min(frame.round, replay.roundStarts.length));
    $("replay-counter").textContent = `move ${replay.index} of ${replay.frames.length - 1}`;
    $("replay-move").textContent = describe(frame);
    $("table").dataset.frame = String(replay.index);
    $("turn").textContent = frame.phase === "FINISHED"
      ? `Finished. Won by ${(match.winners || []).map(seatName).join(", ")}.`
      : `Round ${frame.round} of ${match.rounds}`;
  }

  function describe(frame) {
    const move = frame.move;
    if (!move) return "the deal of round 1";
    const who = seatName(move.seat);
    let text = move.bid !== undefined ? `${who} bids ${move.bid}`
      : move.trump !== undefined ? `${who} chooses ${move.trump.toLowerCase()} as trump`
        : `${who} plays ${move.card === "W" ? "a Wizard" : move.card === "J" ? "a Jester" : move.card}`;
    const previous = replay.frames[replay.index - 1];
    if (frame.lastTrick && (!previous || JSON.stringify(previous.lastTrick) !== JSON.stringify(frame.lastTrick))) {
      text += `; ${seatName(frame.lastTrick.winner)} wins the trick`;
    }
    return text;
  }

  function roundStart(round) {
    return replay.roundStarts[Math.max(0, Math.min(round, replay.roundStarts.length) - 1)];
  }

  function step(action) {
    const frame = replay.frames[replay.index];
    const round = frame.phase === "FINISHED" ? replay.roundStarts.length + 1 : frame.round;
    const moves = {
      start: () => 0,
      end: () => replay.frames.length - 1,
      back: () => replay.index - 1,
      forward: () => replay.index + 1,
      "round-back": () => (replay.index > roundStart(round) ? roundStart(round) : roundStart(round - 1)),
      "round-forward": () => (round >= replay.roundStarts.length ? replay.frames.length - 1 : roundStart(round + 1)),
    };
    if (action === "play") return togglePlay();
    pause();
    show(moves[action]());
  }

  function togglePlay() {
    if (replay.timer !== null) return pause();
    if (replay.index >= replay.frames.length - 1) show(0);
    const speed = Number($("replay-speed").value) || 1;
    const button = document.querySelector("[data-step=play]");
    button.textContent = "❚❚";
    button.setAttribute("aria-label", "Pause");
    replay.timer = setInterval(() => {
      if (replay.index >= replay.frames.length - 1) return pause();
      show(replay.index + 1);
    }, 800 / speed);
  }

  function pause() {
    if (replay.timer === null) return;
    clearInterval(replay.timer);
    replay.timer = null;
    const button = document.querySelector("[data-step=play]");
    button.textContent = "▶";
    button.setAttribute("aria-label", "Play");
  }

  function wireControls() {
    for (const button of document.querySelectorAll("[data-step]")) {
      button.addEventListener("click", () => step(button.dataset.step));
    }
    $("replay-position").addEventListener("input", (event) => { pause(); show(Number(event.target.value)); });
    $("replay-round").addEventListener("change", (event) => { pause(); show(roundStart(Number(event.target.value))); });
    $("replay-speed").addEventListener("change", () => { if (replay.timer !== null) { pause(); togglePlay(); } });
    document.addEventListener("keydown", (event) => {
      if (!replay.frames.length || event.altKey || event.ctrlKey || event.metaKey) return;
      if (["INPUT", "SELECT", "TEXTAREA"].includes(event.target.tagName) && event.target.type !== "range") return;
      const action = {
        ArrowLeft: "back", ArrowRight: "forward", Home: "start", End: "end",
        PageUp: "round-back", PageDown: "round-forward", " ": "play",
      }[event.key];
      if (!action) return;
      event.preventDefault();
      step(action);
    });
  }

  /** The seed as published at the end, checked here against the seedHash published at the start. */
  function checkSeed() {
    const box = $("seed");
    if (!match.seed) return;
    const hashed = match.salt ? `${match.salt}:${match.seed}` : match.seed;
    const ok = window.sha256(hashed) === match.seedHash;
    box.replaceChildren(
      el("strong", ok ? "verified" : "mismatch", ok ? "✔ Seed checked" : "✘ Seed does not match"),
      document.createTextNode(` SHA-256 of ${match.salt ? "salt:seed" : "the seed"} `),
      el("code", null, match.seedHash),
      document.createTextNode(ok ? " is the seedHash published at the start." : " differs from the seedHash published at the start!"),
      el("br"), document.createTextNode("seed "), el("code", null, match.seed),
      ...(match.salt ? [document.createTextNode(" · salt "), el("code", null, match.salt)] : []),
    );
    box.dataset.verified = String(ok);
    box.className = ok ? "" : "bad";
  }

  // ------------------------------------------------------------------ start

  wireControls();
  drawLive();
  if (match.status === "FINISHED") startReplay();
  else if (match.status === "WAITING" || match.status === "ACTIVE") follow();
})();
