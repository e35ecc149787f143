// Package gate bounds, in one process, how many holders each key has at
// once (Gates.Enter, Gates.Leave), with a bounded number of callers waiting,
// each for a bounded time, for a holder to leave. It knows nothing of what
// the keys are: the root package gates each merchant's webhook tries by
// merchant and mode with it.
//
// Why waiting at all: a caller turned away must come back later, and for a
// River job that means a snooze, a database write and a fetch before it
// runs again. A merchant whose receiver answers quickly frees a slot every
// few milliseconds: its next delivery waiting in the process takes it at
// once, where a snoozed one would leave it empty until the snooze ends.
// Why bounded: a caller waits on a worker of a shared pool, so a key whose
// holders never leave (a receiver that hangs) ties up at most limit holders
// and maxWaiting waiters of the process, each waiter no longer than the
// wait it was given.
package gate
