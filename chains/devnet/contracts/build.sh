#!/bin/sh
# Rebuilds the devnet USDC token: compiles USDC.sol with the pinned solc-js
# and OpenZeppelin versions (package-lock.json), then regenerates the Go
# bindings in ../usdc. USDC.abi, USDC.bin and ../usdc/usdc.go are committed,
# so only a change to the contract needs this. Called by `make contracts`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
node build.js
# abigen is pinned as a Go tool in go.mod (go get -tool ...@v1.17.10), so
# this builds the same generator every time and caches it.
go tool abigen --abi USDC.abi --bin USDC.bin --pkg usdc --type USDC --out ../usdc/usdc.go
