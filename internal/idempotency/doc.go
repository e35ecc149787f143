// Package idempotency runs a money-moving operation once per caller's
// Idempotency-Key, and answers every retry with the same key from what the
// first request answered (design.md 6, the IETF Idempotency-Key draft).
//
// # Two designs, and which a new operation picks
//
// The service makes operations safe to retry in one of two ways:
//
//   - A claim row (this package): a row in idempotency_keys, unique per
//     (scope, key), is claimed in a short transaction of its own before the
//     operation runs, linked to the transfer the operation records in the
//     transaction that records it, and holds the answer as JSON once there
//     is one. It is for operations that move money during the call (an
//     agent's send and send to a user, a human's withdrawal, an agent's
//     checkout payment): the call waits on a chain, can die half-way, and
//     the retry must neither move the money again nor hang on a request
//     that will never answer.
//   - A key column on the created resource: the resource the request
//     creates carries the key and the request's fingerprint under a unique
//     index (checkout sessions, refunds, card requests, held spend
//     approvals), so the insert itself decides a race and the resource is
//     the answer. It is for operations whose whole effect is one row
//     written in one transaction: nothing can be half-done, so nothing
//     needs a claim or a lease.
//
// A new operation picks the claim row when anything it does happens
// outside its database transaction (a broadcast, a wait for inclusion, a
// call to a partner), and the key column when it only creates one row.
//
// # The runner
//
// Do runs one Op under its Request's key. A second request with the key
// gets:
//
//   - the first answer again, marked replayed, when the first is done and
//     the fingerprint (the operation and the SHA-256 of its canonical form,
//     Fingerprint) matches; a refusal is an answer too: a key names one
//     attempt at one request, and a request changed after a refusal is
//     another request, which needs another key;
//   - ErrKeyReused (REST 422) when the fingerprint differs, whatever the
//     first's state;
//   - while the first runs: once it has recorded its transfer (Claim.Link),
//     the transfer as it is now (Op.Recover: pending until the chain
//     decides), so a client that timed out and retries learns the payment
//     it made and never pays again; before that, ErrInProgress, wrapped in
//     Runner.Conflict (REST 409): nothing has moved yet, and the retry
//     may come back.
//
// What is kept: the operation's answer as JSON (Op.Keep; replayed by
// Op.Replay) in the answer column, or the error as JSON (Runner.KeepError;
// replayed by Runner.ReplayError) in the refusal column. An error that
// KeepError calls not final (it moved nothing and may pass: a chain or the
// database unreachable) is not kept: the claim is released and a retry
// with the same key runs the operation again.
//
// Crashes. The claim is linked to the transfer the operation records in
// the transaction that records it (Claim.Link), so the link exists exactly
// when the transfer does. The answer is written after the operation
// returns; a process that dies in between leaves the claim in flight with
// a lease (Runner.Lease, longer than the operation's wait). A retry is
// answered from the linked transfer as it is now (Op.Recover; never run
// again: the worker finishes the transfer), and once the lease has run
// out that answer is kept; a claim without a transfer recorded nothing,
// and after the lease the retry takes it over and runs the operation. A
// holder that was only slow, not dead, is fenced by the claim's attempt number: Link and the
// answer are written only while the attempt is still its own, so once a
// retry has taken the claim over the slow request's transfer rolls back
// (Link fails) instead of being recorded beside the retry's.
//
// Keys are kept Runner.TTL from the first request; after that the key is
// free again, and Prune deletes the rows. Rate limiting and authentication
// come before the key is looked at and are never kept.
//
// Using it: a caller builds a Runner once (the service does, with its
// clock and its error kinds), and each operation is a short function that
// fills an Op: Request (scope, parsed key, operation name, canonical
// form), Run (the operation; it passes the claim down to Link its
// transfer, and may read Claim.Key and Claim.Fingerprint to keep them on a
// resource it creates instead, as a held send does), Keep, Replay and
// Recover. An empty key runs the operation without a claim.
//
// An operation whose unit of "once" is not the request itself uses the
// claim directly instead of Do: Runner.Claim, then Claim.Hold keeps what
// it acts on before it acts, a retry reads it back (Claim.Held after a
// takeover, Runner.HeldBy while the claim is held) and acts on that, not
// on its own request, and Runner.Finish ends the claim. x402's
// payment-identifier and MPP's Idempotency-Key (one key space, the
// session's) do this: a client that retries signs a new authorization,
// and the key must stand for the first one (agentpay's x402id.go).
package idempotency
