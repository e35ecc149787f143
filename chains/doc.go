// Package chains is the service's view of the blockchains it moves USDC on:
// the interfaces the rules (package agentpay) are written against, so that no
// rule knows a chain's RPC, key format or error text.
//
// What a chain does for the service, and who provides it:
//
//   - Ledger (one per configured chain): balances, transfers from custodial
//     keys whose gas the treasury pays, receipts, and FindTransfer to learn
//     whether a transfer whose answer was lost landed (a transaction counts
//     only if it moved that transfer's amount of USDC from its source to its
//     recipient under its Ref: a Ref alone can be copied onto a decoy). A Network bundles a
//     chain's Ledger with its deposit Watcher factory and Watchlist;
//     Networks are the configured chains of one mode.
//   - Watcher: deposits to watched addresses, followed to finality and
//     resumable from a saved WatcherState. A deposit moves a positive amount
//     of USDC: zero-value transfers and other tokens are not reported.
//   - Wallets (one per Family: the EVM chains share keys and addresses,
//     Solana has its own): new and derived keys, address parsing and
//     normalisation, payment URIs; the EVM family's also implements
//     MessageSigning (EIP-712 wallet signatures).
//
// chains/evm and chains/solana implement these; chains/adapters is the one
// place that knows which adapter serves which chain (cmd/agentpay and tests
// wire the service with it); chains/devnet runs local chains for `agentpay
// dev` and the tests; chains/chainstest is the conformance suite both
// adapters pass.
//
// Errors: an adapter keeps its own errors, with the chain's reason in the
// text, and marks them (Mark) with what they mean to the service:
// ErrRefused (nothing was broadcast), ErrInsufficientFunds (a refusal for
// want of USDC), ErrAlreadyUsed (the chain refuses the Ref as used: the
// funds may have moved), ErrInvalidAddress. The service decides with
// errors.Is on these alone; any other error of Transfer leaves the outcome
// unknown, to be settled later with Receipt or FindTransfer.
//
// Idempotency: every transfer carries a random Ref. Sending the same
// request again to a ledger never moves the funds twice while its first
// transaction is pending or included, and FindTransfer finds it by its Ref
// from any process; on EVM chains the Ref is the EIP-3009 nonce, which the
// token itself refuses twice.
package chains
