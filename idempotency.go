package agentpay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/idempotencykey"
	"agentpay/internal/store"
)

// Idempotency keys on money-moving requests (design.md 6).
//
// A client that does not hear the answer of a send (its connection dropped
// during the up-to-30-s wait for inclusion) cannot tell whether the money
// moved. Retrying with the same Idempotency-Key is safe: the send runs once,
// and every retry gets its first answer. The key is optional (absent: no
// idempotency, as before); it is scoped to the caller (an agent: its id; a
// merchant would be its id and mode), so two callers' equal keys never meet.
//
// A key is claimed in a short transaction of its own, before the request
// runs (claimIdempotencyKey), in a row unique per (scope, key) that holds
// the request's fingerprint: the operation and the SHA-256 of its
// canonical form. A second request with the key then gets:
//
//   - the first answer again, marked replayed, when the first is done and
//     the fingerprint matches (a refusal is an answer too: a key names one
//     attempt at one request, and a request changed after a refusal is
//     another request, which needs another key);
//   - ErrIdempotencyKeyReused (REST 422, as the IETF Idempotency-Key draft
//     says) when the fingerprint differs, whatever the first's state;
//   - ErrConflict "still in progress" (REST 409) while the first runs.
//
// Crashes. The claim is linked to the transfer the send records in the
// transaction that records the transfer (idempotencyClaim.link), so the
// link exists exactly when the transfer does. The answer is written after
// the send returns (finishIdempotent); a process that dies in between
// leaves the claim in flight with a lease (IdempotencyLease, longer than
// the send's 30-s wait). Once the lease has run out a retry is answered
// from the linked transfer's current state, never sent again (the worker
// finishes the transfer itself); a claim without a transfer recorded
// nothing, and the retry takes it over and runs the send. A holder that
// was only slow, not dead, is fenced by the claim's attempt number: the
// link and the answer are written only where the attempt is still its own,
// so once a retry has taken the claim over the slow request's transfer
// rolls back instead of being recorded beside the retry's.
//
// Failures that moved nothing and may pass (a chain or the database
// unreachable, an internal error) are not kept: the claim is released and
// the client's retry with the same key runs the request again. A refusal
// (validation, unknown recipient, limits, balance) is kept and replayed.
// Rate limiting and authentication come before the key is looked at and
// are never kept.
//
// Keys are kept IdempotencyKeyTTL (24 h) from the first request; after
// that the key is free again (the same key then starts a new request), and
// the worker's prune_idempotency_keys job deletes the rows.

// IdempotencyKeyTTL is how long a key is kept and its answer replayed.
const IdempotencyKeyTTL = 24 * time.Hour

// IdempotencyLease is how long a claim stays its request's while the
// request runs: longer than the send's wait for inclusion
// (DefaultSendWait) with room for the work around it. A request still
// running after it loses its claim to a retry (see above).
const IdempotencyLease = 2 * DefaultSendWait

// errIdempotencyInProgress answers a request whose key another request
// holds.
var errIdempotencyInProgress = fmt.Errorf("%w: a request with this Idempotency-Key is still in progress; retry once it has been answered", ErrConflict)

// ParseIdempotencyKey reads an Idempotency-Key value: 1 to 255 printable
// ASCII characters (space to tilde), either bare or as the IETF draft's
// structured-field string (in double quotes, with \" and \\ escapes), so
// `abc` and `"abc"` are the same key. Anything else is a ValidationError.
func ParseIdempotencyKey(raw string) (string, error) {
	key := raw
	if strings.HasPrefix(raw, `"`) {
		var ok bool
		if key, ok = unquoteSFString(raw); !ok {
			return "", Invalid("Idempotency-Key", "must be a string in double quotes with only \\\" and \\\\ escaped, or bare printable ASCII")
		}
	}
	if key == "" || len(key) > IdempotencyKeyMaxLen {
		return "", Invalid("Idempotency-Key", "must be 1 to %d characters long", IdempotencyKeyMaxLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", Invalid("Idempotency-Key", "must contain printable ASCII characters only")
		}
	}
	return key, nil
}

// unquoteSFString decodes an RFC 8941 string: "..." where a backslash
// escapes only a double quote or a backslash.
func unquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s)-1 || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// idempotentRequest is one request under a key.
type idempotentRequest struct {
	scope, key, operation string
	fingerprint           []byte
}

// fingerprintOf is the SHA-256 of the operation and the request's
// canonical form (v's JSON: a struct's fields in their fixed order).
func fingerprintOf(operation string, v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		// The canonical forms are plain structs of strings: cannot fail.
		panic(fmt.Sprintf("idempotency: fingerprint of %s: %v", operation, err))
	}
	sum := sha256.Sum256(append([]byte(operation+"\x00"), body...))
	return sum[:]
}

func agentIdempotencyScope(id uuid.UUID) string { return "agent:" + id.String() }

// idempotencyClaim is the claim a running request holds on its key.
type idempotencyClaim struct {
	id      uuid.UUID
	attempt int
}

// claimIdempotencyKey claims r's key for r, or answers why not: prior is
// set when the request must not run but be answered from that row (done,
// or abandoned after recording its transfer); the errors are
// ErrIdempotencyKeyReused and errIdempotencyInProgress.
func (s *Service) claimIdempotencyKey(ctx context.Context, r idempotentRequest) (claim *idempotencyClaim, prior *ent.IdempotencyKey, err error) {
	for try := 1; ; try++ {
		claim, prior = nil, nil
		err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			// At PostgreSQL's precision, so the times compared later are
			// the times written.
			now := s.now().UTC().Truncate(time.Microsecond)
			row, err := store.ForUpdate(s.cfg.DB, tx.IdempotencyKey.Query().
				Where(idempotencykey.Scope(r.scope), idempotencykey.Key(r.key))).Only(ctx)
			switch {
			case ent.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("idempotency key: reading: %w", err)
			case !row.ExpiresAt.After(now):
				// Past its time: the key is free again.
				if err := tx.IdempotencyKey.DeleteOne(row).Exec(ctx); err != nil {
					return fmt.Errorf("idempotency key: forgetting an expired key: %w", err)
				}
			case row.Operation != r.operation || !bytes.Equal(row.Fingerprint, r.fingerprint):
				return fmt.Errorf("%w: this Idempotency-Key was already used for a different request; a new request needs a new key", ErrIdempotencyKeyReused)
			case row.State == idempotencykey.StateDone:
				prior = row
				return nil
			case row.LockedUntil.After(now):
				return errIdempotencyInProgress
			case row.TransferID != nil:
				// Abandoned after its transfer was recorded: answered from
				// the transfer, never sent again.
				prior = row
				return nil
			default:
				// Abandoned before anything was recorded: this request runs.
				err := tx.IdempotencyKey.UpdateOne(row).
					SetAttempt(row.Attempt + 1).
					SetLockedUntil(now.Add(IdempotencyLease)).
					Exec(ctx)
				if err != nil {
					return fmt.Errorf("idempotency key: taking over: %w", err)
				}
				claim = &idempotencyClaim{id: row.ID, attempt: row.Attempt + 1}
				return nil
			}
			created, err := tx.IdempotencyKey.Create().
				SetScope(r.scope).
				SetKey(r.key).
				SetOperation(r.operation).
				SetFingerprint(r.fingerprint).
				SetLockedUntil(now.Add(IdempotencyLease)).
				SetExpiresAt(now.Add(IdempotencyKeyTTL)).
				SetCreatedAt(now).
				SetUpdatedAt(now).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("idempotency key: claiming: %w", err)
			}
			claim = &idempotencyClaim{id: created.ID, attempt: created.Attempt}
			return nil
		})
		if err != nil && try < 3 && isUniqueViolation(err, "idempotencykey_scope_key", "idempotency_keys.scope, idempotency_keys.key") {
			// A concurrent request inserted the key first (PostgreSQL):
			// read what it holds now.
			continue
		}
		return claim, prior, err
	}
}

// link records, in the transaction that records the transfer, that the
// claim's request recorded it. It fails with errIdempotencyInProgress, and
// so rolls the transfer back, when the claim is no longer this request's
// (a retry took it over after the lease ran out). A nil claim links
// nothing.
func (c *idempotencyClaim) link(ctx context.Context, tx *ent.Tx, transferID uuid.UUID) error {
	if c == nil {
		return nil
	}
	n, err := tx.IdempotencyKey.Update().
		Where(
			idempotencykey.ID(c.id),
			idempotencykey.Attempt(c.attempt),
			idempotencykey.StateEQ(idempotencykey.StateInFlight),
			idempotencykey.TransferIDIsNil(),
		).
		SetTransferID(transferID).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("idempotency key: linking transfer: %w", err)
	}
	if n == 0 {
		return errIdempotencyInProgress
	}
	return nil
}

// idempotentOutcome is a request's answer as kept: one of its fields.
type idempotentOutcome struct {
	Send       *sentAnswer       `json:"send,omitempty"`
	Withdrawal *withdrawalAnswer `json:"withdrawal,omitempty"`
	// CheckoutPayment: an agent's checkout payment (agentcheckout.go).
	CheckoutPayment *checkoutPaymentAnswer `json:"checkout_payment,omitempty"`
	// X402Payment: the authorization an x402 payment-identifier stands
	// for (x402id.go), kept from before its relay.
	X402Payment *x402PaymentAnswer `json:"x402_payment,omitempty"`
	Error       *refusalAnswer     `json:"error,omitempty"`
}

// refusalAnswer is an error answer as kept: which kind (keeping the
// status it maps to), and the text shown.
type refusalAnswer struct {
	Kind    string `json:"kind"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// refusalKinds name the kept errors: whether each is final (kept even when
// nothing was recorded), and the sentinel it is replayed as. Anything else
// is "internal", kept only once something was recorded, and replayed as an
// error that shows as "internal error".
var refusalKinds = []struct {
	kind  string
	err   error
	final bool
}{
	{"not_found", ErrNotFound, true},
	{"forbidden", ErrForbidden, true},
	{"insufficient_funds", ErrInsufficientFunds, true},
	{"conflict", ErrConflict, true},
	{"unavailable", ErrUnavailable, false},
}

// refusalOf is err as kept, and whether it is final.
func refusalOf(err error) (*refusalAnswer, bool) {
	var v *ValidationError
	if errors.As(err, &v) {
		return &refusalAnswer{Kind: "validation", Field: v.Field, Message: v.Message}, true
	}
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			return &refusalAnswer{Kind: k.kind, Message: err.Error()}, k.final
		}
	}
	// Never the internal detail: it stays in the log.
	return &refusalAnswer{Kind: "internal", Message: "internal error"}, false
}

// err is the kept error again, mapping to the same status and text.
func (r *refusalAnswer) err() error {
	if r.Kind == "validation" {
		return &ValidationError{Field: r.Field, Message: r.Message}
	}
	for _, k := range refusalKinds {
		if k.kind == r.Kind {
			return &replayedError{kind: k.err, msg: r.Message}
		}
	}
	return errors.New(r.Message)
}

// replayedError is a kept error: its text as first shown, its kind for
// errors.Is.
type replayedError struct {
	kind error
	msg  string
}

func (e *replayedError) Error() string { return e.msg }
func (e *replayedError) Unwrap() error { return e.kind }

// finishIdempotent records the answer of the claim's request: kept (done)
// when the request succeeded, was refused, or recorded its transfer;
// otherwise released (a failure that moved nothing), so a retry runs it
// again. Nothing is written when the claim is no longer the request's. A
// failure to write is logged: the claim then stays in flight until its
// lease runs out, and a retry answers from the transfer or takes it over.
func (s *Service) finishIdempotent(ctx context.Context, c *idempotencyClaim, outcome idempotentOutcome, final bool) {
	ctx = context.WithoutCancel(ctx) // the client leaving does not undo the answer
	body, err := json.Marshal(outcome)
	if err == nil {
		err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			row, err := store.ForUpdate(s.cfg.DB, tx.IdempotencyKey.Query().Where(
				idempotencykey.ID(c.id),
				idempotencykey.Attempt(c.attempt),
				idempotencykey.StateEQ(idempotencykey.StateInFlight),
			)).Only(ctx)
			if ent.IsNotFound(err) {
				s.logger.WarnContext(ctx, "idempotency key: the claim was taken over before the request ended; its answer is not kept", "claim", c.id)
				return nil
			}
			if err != nil {
				return err
			}
			if !final && row.TransferID == nil {
				return tx.IdempotencyKey.DeleteOne(row).Exec(ctx)
			}
			return tx.IdempotencyKey.UpdateOne(row).
				SetState(idempotencykey.StateDone).
				SetOutcome(string(body)).
				Exec(ctx)
		})
	}
	if err != nil {
		s.logger.WarnContext(ctx, "idempotency key: recording the answer", "claim", c.id, "err", err)
	}
}

// PruneIdempotencyKeys deletes the keys past their IdempotencyKeyTTL (a
// claim finds and replaces an expired key itself; this keeps the table to
// a day's requests). It returns how many it deleted.
func (s *Service) PruneIdempotencyKeys(ctx context.Context) (int, error) {
	n, err := s.cfg.DB.Ent.IdempotencyKey.Delete().
		Where(idempotencykey.ExpiresAtLT(s.now().UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning idempotency keys: %w", err)
	}
	return n, nil
}

// Sends under a key.

// sendFingerprinted is a send request's canonical form: what the service
// acts on (an absent memo or chain is ""; the amount as a number, so 50 and
// 50.00 are the same request). Wait is how long to wait, not what to do.
type sendFingerprinted struct {
	ToUsername string `json:"to_username"`
	AmountUSD  string `json:"amount_usd"`
	Memo       string `json:"memo"`
	Chain      string `json:"chain"`
}

// sentAnswer is a send's answer as kept.
type sentAnswer struct {
	TransferID uuid.UUID `json:"transfer_id"`
	// ApprovalID: a spending policy held the send (no transfer yet).
	ApprovalID   *uuid.UUID      `json:"approval_id,omitempty"`
	FromUsername string          `json:"from_username"`
	ToUsername   string          `json:"to_username"`
	Chain        string          `json:"chain"`
	Amount       decimal.Decimal `json:"amount"`
	Delivered    decimal.Decimal `json:"delivered"`
	Fee          decimal.Decimal `json:"fee"`
	TxHash       string          `json:"tx_hash"`
	FeeTxHash    string          `json:"fee_tx_hash"`
	Status       string          `json:"status"`
	Message      string          `json:"message"`
}

// SendIdempotent is Send under the caller's Idempotency-Key (see the note
// at the top of this file); a nil key is Send itself. replayed is true when
// the answer (result or error) is an earlier request's, not this one's.
func (s *Service) SendIdempotent(ctx context.Context, from *ent.Agent, key *string, req SendRequest) (res *SendResult, replayed bool, err error) {
	if key == nil {
		res, err := s.Send(ctx, from, req)
		return res, false, err
	}
	k, err := ParseIdempotencyKey(*key)
	if err != nil {
		return nil, false, err
	}
	r := idempotentRequest{
		scope:     agentIdempotencyScope(from.ID),
		key:       k,
		operation: req.operation(),
		fingerprint: fingerprintOf(req.operation(), sendFingerprinted{
			ToUsername: req.ToUsername, AmountUSD: req.AmountUSD.String(), Memo: req.Memo, Chain: req.Chain,
		}),
	}
	claim, prior, err := s.claimIdempotencyKey(ctx, r)
	if err != nil {
		return nil, false, err
	}
	if prior != nil {
		res, err := s.replaySend(ctx, from, prior)
		return res, true, err
	}
	req.idempotency, req.key, req.fingerprint = claim, &k, r.fingerprint
	res, err = s.Send(ctx, from, req)
	var outcome idempotentOutcome
	final := true
	if err != nil {
		outcome.Error, final = refusalOf(err)
	} else {
		outcome.Send = sentAnswerOf(res)
	}
	s.finishIdempotent(ctx, claim, outcome, final)
	return res, false, err
}

func sentAnswerOf(r *SendResult) *sentAnswer {
	if r.Approval != nil {
		return &sentAnswer{ApprovalID: &r.Approval.Approval.ID, FromUsername: r.FromUsername, ToUsername: r.ToUsername}
	}
	return &sentAnswer{
		TransferID: r.Transfer.ID, FromUsername: r.FromUsername, ToUsername: r.ToUsername, Chain: string(r.Chain),
		Amount: r.Amount, Delivered: r.Delivered, Fee: r.Fee, TxHash: r.TxHash, FeeTxHash: r.FeeTxHash,
		Status: r.Status, Message: r.Message,
	}
}

// replaySend answers a send from its key's row: the kept answer, or for a
// request abandoned after recording its transfer the transfer as it is now
// (then kept as the answer, so later replays match).
func (s *Service) replaySend(ctx context.Context, from *ent.Agent, row *ent.IdempotencyKey) (*SendResult, error) {
	if row.State == idempotencykey.StateDone {
		var out idempotentOutcome
		if err := json.Unmarshal([]byte(row.Outcome), &out); err != nil || (out.Send == nil && out.Error == nil) {
			return nil, fmt.Errorf("idempotency key %s: unreadable answer: %v", row.ID, err)
		}
		if out.Error != nil {
			return nil, out.Error.err()
		}
		a := out.Send
		if a.ApprovalID != nil {
			return s.replayHeldSend(ctx, *a.ApprovalID, a.FromUsername, a.ToUsername)
		}
		t, err := s.cfg.DB.Ent.Transfer.Get(ctx, a.TransferID)
		if err != nil {
			return nil, fmt.Errorf("idempotency key %s: transfer: %w", row.ID, err)
		}
		return &SendResult{
			Transfer: t, FromUsername: a.FromUsername, ToUsername: a.ToUsername, Chain: chains.Name(a.Chain),
			Amount: a.Amount, Delivered: a.Delivered, Fee: a.Fee, TxHash: a.TxHash, FeeTxHash: a.FeeTxHash,
			Status: a.Status, Message: a.Message,
		}, nil
	}
	t, err := s.cfg.DB.Ent.Transfer.Get(ctx, *row.TransferID)
	if err != nil {
		return nil, fmt.Errorf("idempotency key %s: transfer: %w", row.ID, err)
	}
	to, err := s.recipientOf(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("idempotency key %s: %w", row.ID, err)
	}
	res := s.sendResult(t, from.Username, to.username)
	s.finishIdempotent(ctx, &idempotencyClaim{id: row.ID, attempt: row.Attempt}, idempotentOutcome{Send: sentAnswerOf(res)}, true)
	return res, nil
}
