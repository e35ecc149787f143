// Package webhooksend is the machinery of webhook delivery that decides
// nothing: claiming a merchant's due deliveries under a lease (Claim,
// ClaimOne, Release: the root's webhook_batch.go says why), posting one
// signed try (Post; the same post for agentpay's Standard Webhooks and
// ACP's Merchant-Signature order webhooks, which differ only in the
// headers their Request.Sign sets), reading what a try needs (Load,
// LoadMany), and recording tries (RecordPostgres), each as cheaply as the
// database allows. The rules stay in the root package (agentpay): which
// events are sent, to which URL of which mode, the retry schedule, the
// per-merchant cap and the slow lane, what the attempt log and the merchant
// feed say (webhook_delivery.go, webhook_limits.go, webhook_receivers.go,
// acp_webhook_delivery.go, merchant_feed.go there).
//
// Throughput comes from round trips, not CPU: a delivery to a receiver that
// answers at once is a River fetch, a read, a POST, a recorded try and a
// River completion, and all but the POST are database round trips. So
// concurrent deliveries share them: the reads of deliveries started
// together are one statement (Load, store.Batched), and on PostgreSQL the
// tries recorded together are one statement and one commit
// (RecordPostgres), one WAL flush for a batch. Each call still waits for its
// own batch: a try is durable before its job completes, so a worker that
// crashes loses nothing (the job runs again and finds the delivery as the
// last commit left it).
package webhooksend
