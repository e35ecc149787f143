// Package payout is the shape of a fiat payout provider as the service
// uses one (docs/checkout.md, "Settlement"): a merchant settled in fiat
// (fiat_pix) is paid by the provider, which quotes the FX rate and reports
// what it paid; the service converts nothing itself and records both.
//
// The provider must treat Request.IdempotencyKey as the identity of the
// payout: asked again with the same key it answers the first payout,
// never a second one, so a settlement batch retried after a crash pays
// once.
//
// payout/sandbox is a PIX provider that runs inside `agentpay dev` and the
// tests without moving money. A real provider is added by implementing
// Provider and wiring it per mode in Config.Payouts (cmd/agentpay).
package payout
