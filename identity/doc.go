// Package identity is the shape of an identity verification provider, as
// the service uses one (docs/identity-and-cards.md): the hosted flows that
// identity providers offer. The service starts a verification for a
// person (Provider.Start) and sends the person to the provider's page; the
// person completes the provider's flow there; the provider tells the
// service the outcome by calling its callback endpoint
// (POST /identity/callbacks/<provider>) with a signed result, which
// Provider.Callback checks and reads.
//
// The service stores the provider's reference, the state and the times,
// never documents or personal data: those stay with the provider.
//
// identity/sandbox is a provider that runs inside `agentpay dev` and the
// tests: its page lets the tester choose the outcome, and it calls back
// through the same signed endpoint a real provider calls. A real provider
// is added by implementing Provider (docs/identity-and-cards.md lists what
// one needs).
package identity
