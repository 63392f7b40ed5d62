#!/usr/bin/env bash
# Refreshes the pages' vendored files (vendor/) from the npm registry, the one place they come
# from: set the version below, run this script, review `git diff`, then run the pages' tests
# (tests/service/test_pages.py, test_match_page.py). Needs node and npm; nothing here runs when
# the service does.
set -euo pipefail

JS_SHA256=1.0.0   # SHA-256 in the browser on any origin (crypto.subtle only exists on https and localhost)

vendor="$(cd "$(dirname "$0")" && pwd)/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# npm checks each tarball against the registry's integrity hash, recorded in SOURCES below
npm pack --json --silent "js-sha256@$JS_SHA256" > packed.json
tar xzf "js-sha256-$JS_SHA256.tgz"

rm -f "$vendor"/*
cp package/build/sha256.min.js "$vendor/"
cp package/LICENSE.txt "$vendor/LICENSE.js-sha256"

node -e '
  const packed = JSON.parse(require("fs").readFileSync("packed.json", "utf8"));
  console.log("# npm packages the files of this folder come from (written by ../refresh.sh)");
  for (const p of packed) console.log(`${p.id} ${p.integrity}`);
' > "$vendor/SOURCES"
(cd "$vendor" && sha256sum -- *.js LICENSE.* > SHA256SUMS)
ls -l "$vendor"
