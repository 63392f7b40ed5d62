// The GraphQL-over-HTTP spec's server audit (graphql-http's auditServer) against URL (argv[2]).
// Prints one JSON line per audit: {id, name, status, reason?, response?}; exits 0 once all ran.
import { auditServer } from 'graphql-http';

const url = process.argv[2];
const results = await auditServer({ url });
for (const result of results) {
  const line = { id: result.id, name: result.name, status: result.status };
  if (result.status !== 'ok') {
    line.reason = result.reason;
    const response = result.response;
    line.response = {
      status: response.status,
      contentType: response.headers.get('content-type'),
      body: (await response.text().catch(() => '')).slice(0, 500),
    };
  }
  console.log(JSON.stringify(line));
}
