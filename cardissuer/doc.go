// Package cardissuer is the interface between agentpay and a card issuer:
// the outside service that issues the single-use virtual cards a human
// approves for an agent's purchase (docs/identity-and-cards.md).
//
// The shape follows the issuing APIs of card programs (Lithic, Stripe
// Issuing, Marqeta): the service asks for a card with spending controls
// (a maximum, one merchant, an expiry) and gets its number, expiry and
// CVC once; the card network then asks the service, in real time, whether
// to authorize each charge (the service decides by its own rules, in
// cards.go, so a card is charged at most once whatever the issuer does);
// and the service closes a card it no longer wants charged. The sandbox
// (cardissuer/sandbox) does all of this in memory and plays the network
// for `agentpay dev`'s POST /dev/card/charge.
package cardissuer
