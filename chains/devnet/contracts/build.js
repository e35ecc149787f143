// Compiles USDC.sol with solc-js (offline: the compiler ships inside the npm
// package) and writes USDC.abi and USDC.bin next to this file. Those two files
// are committed, so building Go code never needs node; run this (through
// build.sh) only after changing the contract or the pinned versions.
'use strict';

const fs = require('fs');
const path = require('path');
const solc = require('solc');

const here = __dirname;
const source = 'USDC.sol';

const input = {
  language: 'Solidity',
  sources: { [source]: { content: fs.readFileSync(path.join(here, source), 'utf8') } },
  settings: {
    // Pinned rather than the compiler default so the bytecode runs the same
    // on every devnet fork configuration go-ethereum's simulator enables.
    evmVersion: 'cancun',
    optimizer: { enabled: true, runs: 200 },
    // No IPFS hash in the metadata: keeps USDC.bin stable across checkouts
    // whose absolute paths or whitespace differ.
    metadata: { bytecodeHash: 'none' },
    outputSelection: { [source]: { USDC: ['abi', 'evm.bytecode.object'] } },
  },
};

// Resolves "@openzeppelin/contracts/..." imports from node_modules.
function findImports(importPath) {
  try {
    return { contents: fs.readFileSync(require.resolve(importPath, { paths: [here] }), 'utf8') };
  } catch (err) {
    return { error: `import ${importPath}: ${err.message}` };
  }
}

const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
let failed = false;
for (const diag of output.errors || []) {
  process.stderr.write(diag.formattedMessage || diag.message);
  if (diag.severity === 'error') failed = true;
}
if (failed) process.exit(1);

const contract = output.contracts[source].USDC;
fs.writeFileSync(path.join(here, 'USDC.abi'), JSON.stringify(contract.abi, null, 2) + '\n');
fs.writeFileSync(path.join(here, 'USDC.bin'), contract.evm.bytecode.object); // no newline: abigen embeds the file verbatim in a string literal
console.log(`solc ${solc.version()}: wrote USDC.abi and USDC.bin (${contract.evm.bytecode.object.length / 2} bytes)`);
