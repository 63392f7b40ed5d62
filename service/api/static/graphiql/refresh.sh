#!/usr/bin/env bash
# Refreshes the vendored files of the GraphiQL page (vendor/) from the npm registry, the one
# place they come from: set the versions below, run this script, review `git diff`, then run
# the page's test (tests/api/test_graphiql_page.py). Needs node and npm; nothing here runs
# when the service does.
set -euo pipefail

GRAPHIQL=4.1.2   # the last major version with a browser-ready (UMD) build; 5 needs a bundler
REACT=18.3.1     # GraphiQL 4's UMD build is built for React 18; React 19 ships no UMD build

vendor="$(cd "$(dirname "$0")" && pwd)/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# npm checks each tarball against the registry's integrity hash, recorded in SOURCES below
npm pack --json --silent "graphiql@$GRAPHIQL" "react@$REACT" "react-dom@$REACT" > packed.json
for tarball in *.tgz; do
  mkdir "${tarball%.tgz}" && tar xzf "$tarball" -C "${tarball%.tgz}"
done

rm -f "$vendor"/*
cp "graphiql-$GRAPHIQL/package/graphiql.min.js" "graphiql-$GRAPHIQL/package/graphiql.min.css" "$vendor/"
cp "graphiql-$GRAPHIQL/package/LICENSE" "$vendor/LICENSE.graphiql"
cp "react-$REACT/package/umd/react.production.min.js" "$vendor/"
cp "react-$REACT/package/LICENSE" "$vendor/LICENSE.react"
cp "react-dom-$REACT/package/umd/react-dom.production.min.js" "$vendor/"
cp "react-dom-$REACT/package/LICENSE" "$vendor/LICENSE.react-dom"

node -e '
  const packed = JSON.parse(require("fs").readFileSync("packed.json", "utf8"));
  console.log("# npm packages the files of this folder come from (written by ../refresh.sh)");
  for (const p of packed) console.log(`${p.id} ${p.integrity}`);
' > "$vendor/SOURCES"
(cd "$vendor" && sha256sum -- *.js *.css LICENSE.* > SHA256SUMS)
ls -l "$vendor"
