// Package authcache is the authentication cache: what a key authenticated
// (an agent with its wallets; a merchant and the key's mode) as read from
// the database at most a TTL ago. It knows no owner: the root package says
// which values it caches and which committed rows change which owner.
//
// Reading the key on every request was what an authenticated call cost
// most on PostgreSQL (one round trip, on two cores shared with the
// database). Entries are trusted for a short time only, and:
//
//   - A change this process commits to an owner (an agent or its wallets: a
//     send's counters, a trust score, a verified wallet, a new key; a
//     merchant or its keys: an update, a roll, a deactivation) drops the
//     owner's entries as it commits (Cache.Listener, fed by the store's
//     change listeners), so this instance never answers from the owner as
//     it was before its own change.
//   - Another instance's change shows here within the TTL.
//   - A change that must hold everywhere at once (a regenerated agent key,
//     rolled merchant keys, a deactivated merchant, a partner verification
//     and the tier it brings) answers only after the
//     TTL has passed (Cache.WaitTTL): every instance's entry was read before
//     the change committed and has expired by then, so once the caller
//     knows of the change no instance still accepts what it revoked.
//
// Entries record the change counter (the epoch) as it was when their read
// began: an entry whose owner changed after that is never stored or
// served, so a read racing a commit cannot bring back what the commit
// replaced. Concurrent requests of a key that is not cached can share one
// read (Cache.Share).
//
// Entries age by the service's clock (Config.Clock, internal/clock), so a
// test sees an entry expire by moving that clock past the TTL instead of
// sleeping through it.
package authcache
