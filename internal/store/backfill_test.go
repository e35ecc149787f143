package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/internal/idempotency"
	"agentpay/internal/testdb"
)

// TestIdentityProofsBackfill: the identity_proofs migration applies issue
// 23's rule to what an older release left (docs/security.md, Identity: only
// a link received at an address proves it). An account whose address never
// signed in by an e-mailed link (made from an invitation link its agent
// also held) is unverified; a merchant's contact e-mail is confirmed when
// its address has signed in by an e-mailed link, else by its next one; the
// contact e-mail's memberships stay only where both hold, for the current
// address; invitations accepted by an unverified account wait for it;
// sent mail keeps no body.
func TestIdentityProofsBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.OpenEmpty(t)
	require.NoError(t, db.MigrateBefore(ctx, "identity_proofs"))
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.ExecContext(ctx, db.Rebind(query), args...)
		require.NoError(t, err, query)
	}
	user := func(email string) uuid.UUID {
		id := uuid.New()
		exec(`INSERT INTO users (id, created_at, updated_at, username, display_name, email, email_verified_at, identity_status)
			VALUES (?, ?, ?, ?, '', ?, ?, 'not_started')`, id, at, at, "u"+id.String()[:8], email, at)
		return id
	}
	loginToken := func(email string, used bool) {
		var usedAt any
		if used {
			usedAt = at.Add(time.Minute)
		}
		exec(`INSERT INTO login_tokens (id, created_at, updated_at, email, token_hash, expires_at, used_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, uuid.New(), at, at, email, uuid.New().String(), at.Add(15*time.Minute), usedAt)
	}
	merchant := func(email string) uuid.UUID {
		id := uuid.New()
		exec(`INSERT INTO merchants (id, created_at, updated_at, name, email, email_normalized, settlement_type,
			settle_held_payments, webhook_secret_encrypted, active) VALUES (?, ?, ?, 'Shop', ?, ?, 'crypto_usdc', ?, ?, ?)`,
			id, at, at, email, email, false, []byte("sealed"), true)
		return id
	}
	member := func(merchantID uuid.UUID, email string, userID, invitedBy *uuid.UUID) uuid.UUID {
		id := uuid.New()
		var accepted any
		if userID != nil {
			accepted = at
		}
		exec(`INSERT INTO merchant_members (id, created_at, updated_at, merchant_id, user_id, email, role, invited_by, accepted_at)
			VALUES (?, ?, ?, ?, ?, ?, 'owner', ?, ?)`, id, at, at, merchantID, userID, email, invitedBy, accepted)
		return id
	}

	signedIn := user("signed@example.com") // signed in by an e-mailed link
	loginToken("signed@example.com", true)
	invited := user("invited@example.com") // made from an invitation link only
	loginToken("invited@example.com", false)
	proved := merchant("signed@example.com")
	unproved := merchant("invited@example.com")
	nobody := merchant("nobody@example.com")
	keptOwner := member(proved, "signed@example.com", &signedIn, nil)
	formerContact := member(proved, "former@example.com", &signedIn, nil)
	unverifiedOwner := member(unproved, "invited@example.com", &invited, nil)
	acceptedByUnverified := member(proved, "invited@example.com", &invited, &signedIn)
	browser := uuid.New()
	exec(`INSERT INTO browser_sessions (id, created_at, updated_at, user_id, token_hash, expires_at, user_agent)
		VALUES (?, ?, ?, ?, ?, ?, '')`, browser, at, at, invited, uuid.New().String(), at.Add(time.Hour))
	exec(`INSERT INTO dashboard_sessions (id, created_at, updated_at, merchant_id, user_id, browser_session_id, mode, token_hash, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, 'live', ?, ?)`, uuid.New(), at, at, unproved, invited, browser, uuid.New().String(), at.Add(time.Hour))
	sentMail, queuedMail := uuid.New(), uuid.New()
	exec(`INSERT INTO mail_messages (id, created_at, updated_at, "to", subject, text, html, attempts, sent_at, last_error, transport)
		VALUES (?, ?, ?, 'signed@example.com', 'Sign in', 'https://app/signin/sil_x', '<a>x</a>', 1, ?, '', 'catcher')`, sentMail, at, at, at)
	exec(`INSERT INTO mail_messages (id, created_at, updated_at, "to", subject, text, html, attempts, last_error, transport)
		VALUES (?, ?, ?, 'signed@example.com', 'Queued', 'body', '', 0, '', '')`, queuedMail, at, at)

	_, err := db.Migrate(ctx, nil)
	require.NoError(t, err)

	isNull := func(query string, id uuid.UUID) bool {
		t.Helper()
		var v sql.NullString
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind(query), id).Scan(&v), query)
		return !v.Valid
	}
	exists := func(table string, id uuid.UUID) bool {
		t.Helper()
		var n int
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT count(*) FROM "+table+" WHERE id = ?"), id).Scan(&n))
		return n == 1
	}
	require.False(t, isNull("SELECT email_verified_at FROM users WHERE id = ?", signedIn), "signed in by e-mail: still verified")
	require.True(t, isNull("SELECT email_verified_at FROM users WHERE id = ?", invited), "never signed in by e-mail: unverified")

	require.False(t, isNull("SELECT email_verified_at FROM merchants WHERE id = ?", proved), "its address signed in by e-mail: confirmed")
	for _, id := range []uuid.UUID{unproved, nobody} {
		require.True(t, isNull("SELECT email_verified_at FROM merchants WHERE id = ?", id))
		var onSignIn bool
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT email_confirms_on_signin FROM merchants WHERE id = ?"), id).Scan(&onSignIn))
		require.True(t, onSignIn, "confirmed by its address's next e-mailed sign-in")
	}

	require.True(t, exists("merchant_members", keptOwner), "the confirmed contact's verified owner stays")
	require.False(t, exists("merchant_members", formerContact), "a former contact e-mail's ownership ends")
	require.False(t, exists("merchant_members", unverifiedOwner), "an unverified account owns nothing")
	require.True(t, exists("merchant_members", acceptedByUnverified))
	require.True(t, isNull("SELECT user_id FROM merchant_members WHERE id = ?", acceptedByUnverified), "back to a pending invitation")
	require.True(t, isNull("SELECT accepted_at FROM merchant_members WHERE id = ?", acceptedByUnverified))
	var sessions int
	require.NoError(t, db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM dashboard_sessions").Scan(&sessions))
	require.Zero(t, sessions, "the unverified account's dashboard sessions end")

	var text, html string
	require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT text, html FROM mail_messages WHERE id = ?"), sentMail).Scan(&text, &html))
	require.Empty(t, text+html, "a sent message keeps no body")
	require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT text FROM mail_messages WHERE id = ?"), queuedMail).Scan(&text))
	require.Equal(t, "body", text, "a queued one is still to be sent")
}

// TestIdempotencyOutcomeBackfill: the idempotency_outcome migration moves
// the answers kept before it (one JSON field per operation in outcome:
// send, withdrawal, checkout_payment, or error) to the answer and refusal
// columns the generic runner reads, so a retry after the upgrade with a key
// used before it is answered as before, not run again; a claim still in
// flight stays without either.
func TestIdempotencyOutcomeBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.OpenEmpty(t)
	require.NoError(t, db.MigrateBefore(ctx, "idempotency_outcome"))
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	type canonical struct {
		To string `json:"to"`
	}
	insert := func(key, operation, state string, outcome any) uuid.UUID {
		t.Helper()
		id := uuid.New()
		_, err := db.SQL.ExecContext(ctx, db.Rebind(`INSERT INTO idempotency_keys
			(id, created_at, updated_at, scope, key, operation, fingerprint, state, attempt, locked_until, expires_at, outcome)
			VALUES (?, ?, ?, 'agent:a', ?, ?, ?, ?, 1, ?, ?, ?)`),
			id, at, at, key, operation, idempotency.Fingerprint(operation, canonical{To: key}), state,
			at.Add(time.Minute), at.Add(24*time.Hour), outcome)
		require.NoError(t, err)
		return id
	}
	transfer := uuid.New().String()
	send := insert("send", "send", "done", `{"send":{"transfer_id":"`+transfer+`","from_username":"alice","to_username":"bob","chain":"base","amount":"5","delivered":"4.995","fee":"0.005","tx_hash":"0xa","fee_tx_hash":"0xb","status":"completed","message":"Sent 5 USDC"}}`)
	withdrawal := insert("withdrawal", "withdraw", "done", `{"withdrawal":{"transfer_id":"`+transfer+`","to_address":"0xto","status":"pending"}}`)
	checkout := insert("checkout", "pay_checkout", "done", `{"checkout_payment":{"transfer_id":"`+transfer+`"}}`)
	refused := insert("refused", "send", "done", `{"error":{"kind":"insufficient_funds","message":"insufficient balance"}}`)
	inFlight := insert("in-flight", "send", "in_flight", nil)

	_, err := db.Migrate(ctx, nil)
	require.NoError(t, err)

	read := func(id uuid.UUID) (answer, refusal sql.NullString) {
		t.Helper()
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT answer, refusal FROM idempotency_keys WHERE id = ?"), id).Scan(&answer, &refusal))
		return answer, refusal
	}
	for id, want := range map[uuid.UUID]string{
		send:       `{"transfer_id":"` + transfer + `","from_username":"alice","to_username":"bob","chain":"base","amount":"5","delivered":"4.995","fee":"0.005","tx_hash":"0xa","fee_tx_hash":"0xb","status":"completed","message":"Sent 5 USDC"}`,
		withdrawal: `{"transfer_id":"` + transfer + `","to_address":"0xto","status":"pending"}`,
		checkout:   `{"transfer_id":"` + transfer + `"}`,
	} {
		answer, refusal := read(id)
		require.True(t, answer.Valid)
		require.JSONEq(t, want, answer.String, "the operation's own answer")
		require.False(t, refusal.Valid)
	}
	answer, refusal := read(refused)
	require.False(t, answer.Valid)
	require.True(t, refusal.Valid)
	require.JSONEq(t, `{"kind":"insufficient_funds","message":"insufficient balance"}`, refusal.String)
	answer, refusal = read(inFlight)
	require.False(t, answer.Valid || refusal.Valid, "nothing kept yet")

	// A retry after the upgrade is answered from the moved answer (or
	// refusal), and runs nothing.
	r := &idempotency.Runner{
		DB: db, Now: func() time.Time { return at.Add(time.Hour) }, TTL: 24 * time.Hour, Lease: time.Minute,
		KeepError:   func(err error) (any, bool) { return err.Error(), true },
		ReplayError: func(kept json.RawMessage) error { return errors.New(string(kept)) },
	}
	retry := func(key, operation string) (json.RawMessage, bool, error) {
		return idempotency.Do(ctx, r, idempotency.Op[json.RawMessage]{
			Request: idempotency.Request{Scope: "agent:a", Key: key, Operation: operation, Canonical: canonical{To: key}},
			Run: func(context.Context, *idempotency.Claim) (json.RawMessage, error) {
				t.Errorf("%s ran again", key)
				return nil, nil
			},
			Keep:   func(a json.RawMessage) any { return a },
			Replay: func(_ context.Context, kept json.RawMessage) (json.RawMessage, error) { return kept, nil },
		})
	}
	got, replayed, err := retry("checkout", "pay_checkout")
	require.NoError(t, err)
	require.True(t, replayed)
	require.JSONEq(t, `{"transfer_id":"`+transfer+`"}`, string(got))
	_, replayed, err = retry("refused", "send")
	require.True(t, replayed)
	require.ErrorContains(t, err, "insufficient_funds")
}

// TestTransferKindBackfill: the transfer_kind migration gives every
// transfer recorded before it its kind from the columns the code read
// then (transfer_kinds.go, transferKindOfParties): a checkout session set
// is an agent's checkout payment, a user sender a withdrawal, an agent
// recipient a send, a user recipient a send to a user, and an agent's
// transfer to no party (the treasury) a card reservation. Whatever state
// the row is in.
func TestTransferKindBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.OpenEmpty(t)
	require.NoError(t, db.MigrateBefore(ctx, "transfer_kind"))
	at := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.ExecContext(ctx, db.Rebind(query), args...)
		require.NoError(t, err, query)
	}
	agent := func() uuid.UUID {
		id := uuid.New()
		exec(`INSERT INTO agents (id, created_at, updated_at, username, api_key_hash, invite_code) VALUES (?, ?, ?, ?, ?, ?)`,
			id, at, at, "a"+id.String()[:8], []byte(id.String()), id.String())
		return id
	}
	alice, bob := agent(), agent()
	user, session := uuid.New(), uuid.New()
	want := map[uuid.UUID]string{}
	transfer := func(kind, status string, fromAgent, fromUser, toAgent, toUser, checkout *uuid.UUID) {
		id := uuid.New()
		exec(`INSERT INTO transfers (id, created_at, updated_at, chain, from_address, to_address, amount, fee, net, status, ref,
			from_agent_id, from_user_id, to_agent_id, to_user_id, checkout_session_id)
			VALUES (?, ?, ?, 'base', '0xfrom', '0xto', 1000000, 1000, 999000, ?, ?, ?, ?, ?, ?, ?)`,
			id, at, at, status, []byte(id.String()), fromAgent, fromUser, toAgent, toUser, checkout)
		want[id] = kind
	}
	for _, status := range []string{"pending", "submitted", "completed", "failed"} {
		transfer("send", status, &alice, nil, &bob, nil, nil)
		transfer("send_to_user", status, &alice, nil, nil, &user, nil)
		transfer("withdrawal", status, nil, &user, nil, nil, nil)
		transfer("checkout_payment", status, &alice, nil, nil, nil, &session)
		transfer("card_reservation", status, &alice, nil, nil, nil, nil)
	}

	_, err := db.Migrate(ctx, nil)
	require.NoError(t, err)

	for id, kind := range want {
		var got string
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT kind FROM transfers WHERE id = ?"), id).Scan(&got))
		require.Equal(t, kind, got, "transfer %s", id)
	}
	// The column is required from now on: a transfer recorded without its
	// kind is refused by the database.
	id := uuid.New()
	_, err = db.SQL.ExecContext(ctx, db.Rebind(`INSERT INTO transfers (id, created_at, updated_at, chain, from_address, to_address,
		amount, fee, net, status, ref, from_agent_id) VALUES (?, ?, ?, 'base', '0xfrom', '0xto', 1, 0, 1, 'pending', ?, ?)`),
		id, at, at, []byte(id.String()), alice)
	require.Error(t, err, "a transfer without a kind")
}

// TestWebhookDeliveryClaimBackfill: the webhook_delivery_claim migration
// gives every delivery recorded before it its event's merchant and mode,
// which a batch's claim reads them by (webhooksend.Claim); without them a
// pending delivery of before would never be claimed. Its job id stays
// unknown (null): its job comes back as before.
func TestWebhookDeliveryClaimBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.OpenEmpty(t)
	require.NoError(t, db.MigrateBefore(ctx, "webhook_delivery_claim"))
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.ExecContext(ctx, db.Rebind(query), args...)
		require.NoError(t, err, query)
	}
	merchant := func() uuid.UUID {
		id := uuid.New()
		exec(`INSERT INTO merchants (id, created_at, updated_at, name, email, email_normalized, settlement_type,
			settle_held_payments, webhook_secret_encrypted, active) VALUES (?, ?, ?, 'Shop', 'shop@example.com', 'shop@example.com', 'crypto_usdc', ?, ?, ?)`,
			id, at, at, false, []byte("sealed"), true)
		return id
	}
	type want struct {
		merchant uuid.UUID
		livemode bool
	}
	wants := map[uuid.UUID]want{}
	delivery := func(merchantID uuid.UUID, livemode bool, status string) {
		event, id := uuid.New(), uuid.New()
		exec(`INSERT INTO webhook_events (id, created_at, updated_at, event_type, payload, livemode, merchant_id) VALUES (?, ?, ?, 'payment.confirmed', ?, ?, ?)`,
			event, at, at, []byte(`{}`), livemode, merchantID)
		exec(`INSERT INTO webhook_deliveries (id, created_at, updated_at, event_id, url, status, attempts, next_attempt_at) VALUES (?, ?, ?, ?, 'https://example.com/hook', ?, 0, ?)`,
			id, at, at, event, status, at)
		wants[id] = want{merchantID, livemode}
	}
	a, b := merchant(), merchant()
	for _, status := range []string{"pending", "succeeded", "failed"} {
		delivery(a, true, status)
		delivery(a, false, status)
		delivery(b, false, status)
	}

	_, err := db.Migrate(ctx, nil)
	require.NoError(t, err)

	for id, w := range wants {
		var (
			merchantID uuid.UUID
			livemode   bool
			jobID      sql.NullInt64
		)
		require.NoError(t, db.SQL.QueryRowContext(ctx, db.Rebind("SELECT merchant_id, livemode, job_id FROM webhook_deliveries WHERE id = ?"), id).
			Scan(&merchantID, &livemode, &jobID))
		require.Equal(t, w.merchant, merchantID, "delivery %s", id)
		require.Equal(t, w.livemode, livemode, "delivery %s", id)
		require.False(t, jobID.Valid)
	}
}
