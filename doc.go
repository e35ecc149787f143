// Package agentpay is the service layer: every rule of the agent and
// merchant APIs lives here. The REST facade (rest), GraphQL (graph), the
// checkout pages (web) and the worker call it; they translate requests and
// answers, they do not decide.
//
// # One file per business concept
//
// The package holds the rules, one business concept per file: a
// checkout session's life (checkout_sessions.go), what its status allows
// (checkout_state.go), the hosted page (checkout_page.go), what a deposit does
// to it (checkout_payments.go), and so on. The machinery the rules use lives behind
// internal/: the database and its transactions (internal/store), keys,
// secrets and ids (internal/vault), rate limit counting (internal/ratelimit),
// the authentication cache (internal/authcache), the chains' heads
// (internal/headcache), the live feeds (internal/statusbus); the chains are
// reached through package chains' interfaces only. Every rule reads the time from the service's one clock
// (Config.Clock, internal/clock), which tests move.
//
// # A change and what it causes commit together
//
// A state change is written in one transaction (store.WithTx) with
// everything it causes: the events it records (RecordEvent) with their
// webhook deliveries, the River jobs it enqueues (internal/jobs), the live
// status it publishes (checkout_status_feed.go). Commit makes all of them
// visible at once; a rollback leaves none, so a crash never loses or
// invents an event or a job. The jobs are idempotent: one run twice changes
// nothing more.
//
// # A caller sees its own
//
// Every object belongs to an agent or a merchant, and a caller reads only
// its own: an agent itself, its wallets and its transfers; a merchant its
// objects in the mode of its key (live keys see live sessions, test keys
// test ones). Another's object is not found, the same answer as an id that
// does not exist, so ids leak nothing about other accounts. Each scope is
// said once (TransfersOf, SessionsOf, PaymentsOf, WebhookEventsOf), and
// REST, GraphQL and the node lookup (queries.go) read through it.
//
// A test key reaches test-mode state only, since it is the key merchants
// spread around (CI, laptops, staging): it changes test mode's webhook URL
// and secret and its own key pair, never a live credential, the live
// webhook endpoint, nor a field both modes share (settlement, what
// customers see); it never sees the live webhook URL (UpdateMerchant,
// RollMerchantKeys, webhook_endpoints.go).
//
// A merchant's people reach it through a dashboard session
// (merchant_dashboard_sessions.go), which is a MerchantAuth of one merchant and one
// mode like a secret key of that mode, every scope above included, with
// the member's role on top (merchant_members.go: read-only members change
// nothing).
//
// # Money moves once per Idempotency-Key
//
// A money-moving request may carry an idempotency key (REST's
// Idempotency-Key header, GraphQL's idempotencyKey): the key is claimed in
// its own short transaction before the request runs, linked to the
// transfer in the transaction that records the transfer, and holds the
// answer afterwards, so a retry is answered, refused or told to wait, and
// never moves money a second time, even after a crash. One runner does it
// for every such operation (internal/idempotency, whose package doc names
// the two designs, a claim row or a key column on the created resource,
// and which a new operation picks); Send, Withdraw and PayCheckout are
// each one entry point, the key inside the request (idempotency.go).
//
// # A transfer says what it is for
//
// A transfer from a custodial wallet (an agent's send or send to a user, a
// user's withdrawal, an agent's checkout payment or card reservation)
// records its kind when it is recorded; the table of kinds
// (transfer_kinds.go, transferKinds) says what each one does on
// completion and failure, whether it has a fee leg and how the books and
// the gas ledger count it, and completion, failure, the reconciler, the
// books and the gas tally dispatch on it instead of reading the kind back
// out of the nullable columns.
//
// # Webhooks (spec 6, design.md section 3)
//
// An event is recorded once, its payload with it (events.go); each
// delivery series of it to the merchant's webhook URL of the event's mode
// (each mode has its own URL and secret, webhook_endpoints.go) is a River
// job (kind deliver_webhook, queue "webhooks") that calls
// DeliverWebhookBatch (webhook_batch.go): for a receiver known to answer,
// the job claims a batch of the merchant's due deliveries under a lease
// and tries them together, one River fetch for many webhooks; otherwise it
// claims and tries its one delivery (DeliverWebhook, webhook_delivery.go).
// The first try runs as soon as a worker picks the
// job up; after a failed try the worker retries at WebhookRetryDelays
// (default 30s, 2m, 10m, 30m, 2h, through the worker's NextRetry, or the
// delivery's next_attempt_at for a batch's try), so a
// delivery gets len(delays)+1 tries (6) and is marked failed when the last
// one fails. Any 2xx within WebhookTimeout is success; redirects are not
// followed (a 3xx is a failure). Every try is kept as a WebhookAttempt.
//
// Idempotency: DeliverWebhook sends nothing for a delivery that already
// succeeded or failed, so a duplicate job is harmless. A crash (or a lost
// database write) between the receiver's 2xx and recording it leaves the
// delivery pending and the job is retried: the receiver then gets the event
// again with the same id (body field "id" and header webhook-id), which is
// what it dedupes on. A redelivery sends the same bytes again, same id
// included.
//
// SSRF: events are sent only to public addresses, except test-mode events
// when the operator allows private ones (Config.WebhookAllowPrivate,
// WEBHOOK_ALLOW_PRIVATE, on under `agentpay dev` only) so a developer's
// local receiver works; webhookMayReachPrivate is the rule. Anyone can
// register a merchant, redeliver and read its attempt log, so test mode
// reaching the service's network by default would map it for them. The
// check runs when each connection is made, on the resolved IP actually
// dialled (so DNS tricks and rebinding do not get around it), for every try
// of every delivery and redelivery; a refusal is recorded as a failed
// attempt with one generic error, no status and no duration
// (webhooksend.SendError), naming nothing of the network. ValidateWebhookURL is
// the early check of the same rule for registration and updates.
//
// Fair share: every merchant's deliveries share the worker's webhook
// workers, so one merchant may have only so many tries in flight per mode
// in a process, and redeliver and send test events only so often; a try
// reads a bounded answer (webhook_limits.go). Anyone can register many
// merchants, so receivers new to a process get one try at a time, and
// slow ones share a bounded part of the workers, the slow lane
// (webhook_receivers.go).
//
// Throughput: what decides nothing (the shared read of what a try needs,
// the signed POST, recording many tries in one statement or transaction)
// is internal/webhooksend; the rules above stay here. A delivery turned
// away at its merchant's cap waits out of the pool (its job snoozed) and,
// for a receiver that answers, comes back at its turn (WebhookBusyWait).
//
// # E-mail goes through an outbox
//
// A change that mails someone queues the message in its own transaction
// (queueMail: a MailMessage row and its send_mail job, queue "mail"); the
// job sends it through Config.Mailer (internal/mail: SMTP, or the dev
// catcher) and is retried with River's backoff while that fails, so a
// rolled-back change mails nothing and a committed one is mailed even when
// the SMTP server was down. A sent message is not sent again; concurrent
// runs take turns through a claim on the row (mail.go, docs/humans.md).
// Links in mail are bearer secrets, so a row keeps no body once its message
// is sent, refused, given up or its link expired. What agents make the
// service mail one address is bounded per recipient and stops when the
// address says no (agent_mail.go).
//
// # Only a link received at an address proves it
//
// An account's address is verified, and a merchant's contact e-mail
// confirmed, only by a link the service e-mailed to that address (human_users.go,
// human_signin.go, human_invitations.go, merchant_email.go); an account is a merchant's
// owner only when both hold (merchant_members.go). Nothing an agent, a
// registrant or a page visitor is answered proves an address
// (docs/security.md, Identity).
package agentpay
