// GraphiQL for Wizard Arena, on the vendored builds of vendor/ (no CDN). Queries and mutations
// go over HTTP (POST to this page's URL); subscriptions over a WebSocket on the same URL
// (graphql-transport-ws, GraphiQL's bundled graphql-ws client). A bot's token goes in the
// Headers pane as {"Authorization": "Bearer <token>"}: sent as that header over HTTP, and as
// connection_init's {"token": "<token>"} over the WebSocket.
(function () {
  'use strict';

  var endpoint = location.origin + location.pathname;
  var socket = endpoint.replace(/^http/, 'ws');
  var fetchers = new Map();  // one fetcher per token: the WebSocket's connection_init carries it

  function tokenOf(headers) {
    var names = Object.keys(headers || {});
    for (var i = 0; i < names.length; i++) {
      var value = headers[names[i]];
      if (names[i].toLowerCase() === 'authorization' && typeof value === 'string') {
        var bearer = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
        if (bearer) return bearer[1];
      }
    }
    return '';
  }

  function fetcher(params, options) {
    var token = tokenOf(options && options.headers);
    var forToken = fetchers.get(token);
    if (!forToken) {
      forToken = GraphiQL.createFetcher({
        url: endpoint,
        subscriptionUrl: socket,
        wsConnectionParams: token ? { token: token } : {},
      });
      fetchers.set(token, forToken);
    }
    return forToken(params, options);
  }

  var defaultQuery = [
    '# Wizard Arena\'s GraphQL API: the documentation is',
    '# behind the book icon on the left.',
    '#',
    '# Queries and mutations go over HTTP, subscriptions',
    '# (matchUpdates, myTurns) over a WebSocket on this URL.',
    '# To act as a bot, put its token (registerBot gives',
    '# one) in Headers below; subscriptions take it too:',
    '#   {"Authorization": "Bearer <token>"}',
    '',
    'query Leaderboard {',
    '  leaderboard(ruleset: WIZARD, first: 10) {',
    '    rank bot { name } rating games',
    '  }',
    '}',
    '',
  ].join('\n');

  // ?query=…&variables=…&operationName=… fill the editors, and follow them as they change
  // (the welcome text above stays out of the address)
  var search = new URLSearchParams(location.search);
  function follow(name) {
    return function (value) {
      if (value && !(name === 'query' && value === defaultQuery)) search.set(name, value);
      else search.delete(name);
      var query = search.toString();
      history.replaceState(null, '', query ? '?' + query : location.pathname);
    };
  }

  var props = {
    fetcher: fetcher,
    defaultEditorToolsVisibility: true,
    defaultQuery: defaultQuery,
    onEditQuery: follow('query'),
    onEditVariables: follow('variables'),
    onEditOperationName: follow('operationName'),
  };
  ['query', 'variables', 'operationName'].forEach(function (name) {
    if (search.has(name)) props[name] = search.get(name);
  });

  ReactDOM.createRoot(document.getElementById('graphiql')).render(React.createElement(GraphiQL, props));
})();
