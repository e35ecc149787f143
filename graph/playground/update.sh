#!/usr/bin/env bash
# Copies GraphiQL's prebuilt browser files into assets/vendor from the exact
# versions package-lock.json pins (`make playground`). The copies are
# committed and embedded in the binary, so neither the Go build nor the
# playground page needs npm or the network; this script is only for an
# upgrade: change package.json, `npm install --package-lock-only`, run it,
# commit package.json, package-lock.json and assets/vendor together.
#
# assets/vendor/MANIFEST names each file's package, version and SHA-256 (the
# Go tests check the embedded files against it and the lock file), and
# LICENSES.txt carries the licence of every package in the lock file: the
# GraphiQL bundle includes its dependencies (CodeMirror, graphql-js, the
# graphql-ws client...).
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund --loglevel=error

out=assets/vendor
rm -rf "$out"
mkdir -p "$out"

# package, file in the package, name served
files=(
	"graphiql graphiql.min.js graphiql.min.js"
	"graphiql graphiql.min.css graphiql.min.css"
	"react umd/react.production.min.js react.production.min.js"
	"react-dom umd/react-dom.production.min.js react-dom.production.min.js"
	"graphql-ws umd/graphql-ws.min.js graphql-ws.min.js"
)
: >"$out/MANIFEST.tmp"
for entry in "${files[@]}"; do
	read -r pkg src name <<<"$entry"
	cp "node_modules/$pkg/$src" "$out/$name"
	version=$(node -p "require('./node_modules/$pkg/package.json').version")
	sum=$(sha256sum "$out/$name" | cut -d' ' -f1)
	echo "$sum $name $pkg@$version" >>"$out/MANIFEST.tmp"
done
LC_ALL=C sort -k2 "$out/MANIFEST.tmp" >"$out/MANIFEST"
rm "$out/MANIFEST.tmp"

# Every package of the lock file, in the lock file's order, with its licence
# file (or its package.json's licence field when it ships none).
node -e '
const fs = require("fs");
const path = require("path");
const lock = require("./package-lock.json");
let text = "Licences of the npm packages the playground files are built from\n(graph/playground/package-lock.json).\n";
for (const dir of Object.keys(lock.packages).filter((p) => p !== "").sort()) {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  text += "\n==== " + pkg.name + "@" + pkg.version + " (" + (pkg.license || "see below") + ")\n\n";
  const file = fs.readdirSync(dir).sort().find((f) => /^licen[cs]e/i.test(f));
  text += file ? fs.readFileSync(path.join(dir, file), "utf8").trim() + "\n" : "No licence file in the package; its package.json says: " + (pkg.license || "nothing") + ".\n";
}
fs.writeFileSync(process.argv[1], text);
' "$out/LICENSES.txt"

echo "assets/vendor updated:"
cat "$out/MANIFEST"
