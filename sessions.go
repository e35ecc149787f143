package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/predicate"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Checkout session rules (spec 2.6, design.md section 3).
var (
	// SessionMinAmount and SessionMaxAmount bound a session's amount in USD.
	SessionMinAmount = decimal.RequireFromString("0.50")
	SessionMaxAmount = decimal.NewFromInt(1_000_000)
)

const (
	// SessionAmountDecimals is the precision of a session amount (cents).
	SessionAmountDecimals = 2
	// SessionCurrency is the only currency sessions are priced in.
	SessionCurrency = "USD"
	// DefaultSessionTTL applies when Config.SessionTTL is zero.
	DefaultSessionTTL = 30 * time.Minute

	SessionDescriptionMaxLen = 1000
	IdempotencyKeyMaxLen     = 255
	// SessionMetadataMaxBytes bounds the metadata object as JSON.
	SessionMetadataMaxBytes = 16 << 10
)

// SessionInput is a create-session request (spec 2.6).
type SessionInput struct {
	// Amount in USD; nil is absent (refused: it is required).
	Amount *decimal.Decimal
	// Currency is required and must be USD (any letter case).
	Currency    string
	Description string
	SuccessURL  string
	CancelURL   string
	// Metadata is a free-form object. Numbers may be float64 or
	// json.Number (decode with UseNumber so that an integer too large for a
	// float64 is refused instead of silently rounded).
	Metadata map[string]any
	// IdempotencyKey is optional; nil is absent.
	IdempotencyKey *string
}

// CreatedSession is a new session and where the customer pays it.
type CreatedSession struct {
	Session     *ent.CheckoutSession
	CheckoutURL string
	EmbedURL    string
}

// SessionURLs returns the hosted page of a session ({PayURL}/pay/<external_id>)
// and its embeddable variant (that + "/embed").
func (s *Service) SessionURLs(externalID string) (checkoutURL, embedURL string) {
	checkoutURL = strings.TrimRight(s.cfg.PayURL, "/") + "/pay/" + externalID
	return checkoutURL, checkoutURL + "/embed"
}

func (s *Service) sessionTTL() time.Duration {
	if s.cfg.SessionTTL > 0 {
		return s.cfg.SessionTTL
	}
	return DefaultSessionTTL
}

// validate checks a create request field by field in the order of spec 2.6
// and returns the metadata as it will be stored (json.Number values turned
// into float64 once they are known to be exact).
func (in SessionInput) validate() (map[string]any, error) {
	if in.Amount == nil {
		return nil, Invalid("amount", "is required")
	}
	a := *in.Amount
	switch {
	case !a.Equal(a.Truncate(SessionAmountDecimals)):
		return nil, Invalid("amount", "must have at most %d decimal places", SessionAmountDecimals)
	case a.LessThan(SessionMinAmount):
		return nil, Invalid("amount", "must be at least %s USD", SessionMinAmount.StringFixed(2))
	case a.GreaterThan(SessionMaxAmount):
		return nil, Invalid("amount", "must be at most %s USD", SessionMaxAmount.String())
	}
	switch {
	case in.Currency == "":
		return nil, Invalid("currency", "is required")
	case !strings.EqualFold(in.Currency, SessionCurrency):
		return nil, Invalid("currency", "must be USD")
	}
	if n := len([]rune(in.Description)); n > SessionDescriptionMaxLen {
		return nil, Invalid("description", "must be at most %d characters long", SessionDescriptionMaxLen)
	}
	if err := validateURL("success_url", in.SuccessURL, true); err != nil {
		return nil, err
	}
	if err := validateURL("cancel_url", in.CancelURL, true); err != nil {
		return nil, err
	}
	meta, err := normaliseMetadata(in.Metadata)
	if err != nil {
		return nil, err
	}
	if k := in.IdempotencyKey; k != nil {
		switch {
		case *k == "" || len(*k) > IdempotencyKeyMaxLen:
			return nil, Invalid("idempotency_key", "must be 1 to %d characters long", IdempotencyKeyMaxLen)
		case strings.IndexFunc(*k, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }) >= 0:
			return nil, Invalid("idempotency_key", "must contain printable characters only")
		}
	}
	return meta, nil
}

// normaliseMetadata checks the metadata object: at most
// SessionMetadataMaxBytes as JSON, and every number exactly representable
// as a JSON double (what it is read back as); it returns a copy with
// json.Number values converted.
func normaliseMetadata(m map[string]any) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, nil
	}
	out, err := exactJSONValue(m, "metadata")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, Invalid("metadata", "must be a JSON object")
	}
	if len(b) > SessionMetadataMaxBytes {
		return nil, Invalid("metadata", "must be at most %d bytes as JSON", SessionMetadataMaxBytes)
	}
	return out.(map[string]any), nil
}

func exactJSONValue(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := exactJSONValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := exactJSONValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		exact, err := ParseDecimal(path, string(x))
		if err != nil {
			return nil, err
		}
		f, ferr := strconv.ParseFloat(string(x), 64)
		if ferr != nil || !decimal.NewFromFloat(f).Equal(exact) {
			return nil, Invalid(path, "number %s cannot be stored exactly; send it as a string", x)
		}
		return f, nil
	case string, bool, nil, float64:
		return x, nil
	default:
		return nil, Invalid(path, "is not a JSON value")
	}
}

// newSessionExternalID draws a session's public id, whose prefix tells its
// mode.
func newSessionExternalID(mode Mode) string {
	if mode == ModeTest {
		return vault.SessionIDTest.New()
	}
	return vault.SessionIDLive.New()
}

func idempotencyConflict(key string, existing *ent.CheckoutSession) error {
	return fmt.Errorf("%w: idempotency_key %q was already used for session %s", ErrConflict, key, existing.ExternalID)
}

// CreateSession creates a checkout session of the caller's merchant in the
// caller's mode (status pending, expiring after Config.SessionTTL). Reusing
// an idempotency key of the same merchant and mode is ErrConflict naming
// the existing session, also when two requests race (the unique index
// decides). A merchant with Config.MaxOpenSessions open sessions in the mode
// is refused with ErrRateLimited (checkOpenSessions). Nothing is written
// when a field is refused.
func (s *Service) CreateSession(ctx context.Context, auth *MerchantAuth, in SessionInput) (*CreatedSession, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	meta, err := in.validate()
	if err != nil {
		return nil, err
	}
	m := auth.Merchant
	livemode := auth.Livemode()
	// Outside a transaction the unique index on (merchant, mode,
	// idempotency_key) decides alone: a reused key fails the insert below
	// (its transaction, which also counts the open sessions, rolls back),
	// and the existing session is then named. Inside the caller's
	// transaction (a GraphQL mutation) a failed insert would abort it on
	// PostgreSQL, so the key is looked up first there.
	if in.IdempotencyKey != nil && ent.TxFromContext(ctx) != nil {
		existing, err := s.sessionByIdempotencyKey(ctx, auth, *in.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if existing != nil {
			return nil, idempotencyConflict(*in.IdempotencyKey, existing)
		}
	}
	for attempt := 1; ; attempt++ {
		externalID := newSessionExternalID(auth.Mode)
		// Times at microsecond precision (PostgreSQL's), so the answer shows
		// what a later read shows.
		now := s.now().UTC().Truncate(time.Microsecond)
		insert := func(ctx context.Context, sessions *ent.CheckoutSessionClient) (*ent.CheckoutSession, error) {
			return sessions.Create().
				SetMerchantID(m.ID).
				SetExternalID(externalID).
				SetLivemode(livemode).
				SetAmountUsd(*in.Amount).
				SetCurrency(SessionCurrency).
				SetDescription(in.Description).
				SetSuccessURL(in.SuccessURL).
				SetCancelURL(in.CancelURL).
				SetMetadata(meta).
				SetNillableIdempotencyKey(in.IdempotencyKey).
				SetStatus(checkoutsession.StatusPending).
				SetCreatedAt(now).
				SetUpdatedAt(now).
				SetExpiresAt(now.Add(s.sessionTTL())).
				Save(ctx)
		}
		var sess *ent.CheckoutSession
		key := openSessionsKeyOf(auth)
		switch {
		case s.cfg.MaxOpenSessions <= 0: // no cap: the insert alone, one round trip
			sess, err = insert(ctx, s.sessionClient(ctx))
		case ent.TxFromContext(ctx) == nil && s.openSessionGrants.Take(key):
			// Headroom this process counted within the second (not inside
			// a caller's transaction: its row would stay invisible to
			// counts after Done, until that transaction commits).
			sess, err = insert(ctx, s.sessionClient(ctx))
			s.openSessionGrants.Done(key)
		default:
			err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				if err := s.checkOpenSessions(ctx, tx, sqlTx, auth, in.IdempotencyKey, now); err != nil {
					return err
				}
				var err error
				sess, err = insert(ctx, tx.CheckoutSession)
				return err
			})
		}
		switch {
		case err == nil:
			checkoutURL, embedURL := s.SessionURLs(sess.ExternalID)
			return &CreatedSession{Session: sess, CheckoutURL: checkoutURL, EmbedURL: embedURL}, nil
		case in.IdempotencyKey != nil && isUniqueViolation(err, "checkoutsession_merchant_id_livemode_idempotency_key",
			"checkout_sessions.merchant_id, checkout_sessions.livemode, checkout_sessions.idempotency_key"):
			existing, lerr := s.sessionByIdempotencyKey(ctx, auth, *in.IdempotencyKey)
			if lerr != nil {
				return nil, lerr
			}
			if existing != nil {
				return nil, idempotencyConflict(*in.IdempotencyKey, existing)
			}
			return nil, fmt.Errorf("%w: idempotency_key %q is in use", ErrConflict, *in.IdempotencyKey)
		case isUniqueViolation(err, "checkout_sessions_external_id_key", "checkout_sessions.external_id") && attempt < 3:
			continue // a collision of 143 random bits: draw again
		case errors.Is(err, ErrRateLimited) || errors.Is(err, ErrConflict):
			return nil, err
		default:
			return nil, fmt.Errorf("creating session: %w", err)
		}
	}
}

// checkOpenSessions refuses a new session to a merchant that has
// Config.MaxOpenSessions open ones (pending or detecting, before
// expires_at) in the caller's mode: each may be given a deposit address per
// chain, every one of them read by the deposit scan, and creating sessions
// costs a merchant nothing. The count is taken under a lock per merchant
// and mode (a transaction advisory lock on PostgreSQL; SQLite's single
// writer), so concurrent creates cannot pass it together. A lock per create
// would make a merchant's creates one commit at a time (measured: 500 a
// second instead of 3,400), so the headroom it finds is remembered
// (internal/headroom): far from the cap, half of it is granted without
// counting for a second, and the grants still in flight are added to the
// next count, so this process never passes the cap. A reused idempotency
// key is still answered ErrConflict naming its session.
func (s *Service) checkOpenSessions(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, auth *MerchantAuth, key *string, now time.Time) error {
	limit := s.cfg.MaxOpenSessions
	if s.cfg.DB.IsPostgres() {
		if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", openSessionsLockKey(auth)); err != nil {
			return fmt.Errorf("locking open sessions: %w", err)
		}
	}
	// The merchant's open sessions are read from the index (merchant, mode,
	// status, expires_at), never more than limit of them.
	open, err := tx.CheckoutSession.Query().
		Where(ownSessions(auth), openAt(now)).
		Limit(limit).
		IDs(ctx)
	if err != nil {
		return fmt.Errorf("counting open sessions: %w", err)
	}
	// The grants in flight are added: their rows may not be visible yet.
	if s.openSessionGrants.Count(openSessionsKeyOf(auth), len(open), limit) {
		return nil
	}
	if key != nil {
		existing, err := s.sessionByIdempotencyKey(ctx, auth, *key)
		if err != nil {
			return err
		}
		if existing != nil {
			return idempotencyConflict(*key, existing)
		}
	}
	// Retry-After: when the first open session expires (a cancel frees a
	// place sooner).
	first, err := tx.CheckoutSession.Query().
		Where(ownSessions(auth), openAt(now)).
		Order(ent.Asc(checkoutsession.FieldExpiresAt)).
		First(ctx)
	if err != nil {
		return fmt.Errorf("reading open sessions: %w", err)
	}
	return &RateLimitError{
		Decision: RateDecision{Limit: limit, Reset: first.ExpiresAt, RetryAfter: first.ExpiresAt.Sub(now), Window: "open sessions"},
		limit: fmt.Sprintf("%d open %s sessions, the most a merchant may have at once; cancel one or wait for one to expire",
			limit, auth.Mode),
	}
}

// openSessionsKey names a merchant's open sessions in a mode in the
// process's headroom cache.
type openSessionsKey struct {
	merchant uuid.UUID
	mode     Mode
}

func openSessionsKeyOf(auth *MerchantAuth) openSessionsKey {
	return openSessionsKey{merchant: auth.Merchant.ID, mode: auth.Mode}
}

// openSessionsLockKey is the PostgreSQL advisory lock key of a merchant's
// open sessions in a mode: a stable 64-bit hash, so every process agrees.
func openSessionsLockKey(auth *MerchantAuth) int64 {
	h := fnv.New64a()
	h.Write([]byte("agentpay open sessions "))
	h.Write(auth.Merchant.ID[:])
	h.Write([]byte(auth.Mode))
	return int64(h.Sum64())
}

// sessionClient is the caller's transaction's client when ctx carries one
// (a GraphQL mutation inside WithTx), else the plain client: on SQLite's
// single connection a query beside an open transaction would wait forever.
func (s *Service) sessionClient(ctx context.Context) *ent.CheckoutSessionClient {
	if tx := ent.TxFromContext(ctx); tx != nil {
		return tx.CheckoutSession
	}
	return s.cfg.DB.Ent.CheckoutSession
}

func (s *Service) sessionByIdempotencyKey(ctx context.Context, auth *MerchantAuth, key string) (*ent.CheckoutSession, error) {
	sess, err := s.sessionClient(ctx).Query().
		Where(
			checkoutsession.MerchantID(auth.Merchant.ID),
			checkoutsession.Livemode(auth.Livemode()),
			checkoutsession.IdempotencyKey(key),
		).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading session by idempotency key: %w", err)
	}
	return sess, nil
}

var errNoSuchSession = fmt.Errorf("%w: no such session", ErrNotFound)

// SessionByExternalID returns any session by its external id (the checkout
// page's lookup: no merchant or mode check). An unknown id is ErrNotFound.
func (s *Service) SessionByExternalID(ctx context.Context, externalID string) (*ent.CheckoutSession, error) {
	sess, err := s.sessionClient(ctx).Query().
		Where(checkoutsession.ExternalID(externalID)).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errNoSuchSession
	}
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", err)
	}
	return sess, nil
}

// MerchantSession returns a session of the caller's merchant in the
// caller's mode. Another merchant's session, or one of the other mode, is
// ErrNotFound exactly like an unknown id, so ids of others leak nothing.
func (s *Service) MerchantSession(ctx context.Context, auth *MerchantAuth, externalID string) (*ent.CheckoutSession, error) {
	sess, err := s.sessionClient(ctx).Query().
		Where(ownSession(auth, externalID)).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errNoSuchSession
	}
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", err)
	}
	return sess, nil
}

// ownSession is the caller's session externalID (ownSessions).
func ownSession(auth *MerchantAuth, externalID string) predicate.CheckoutSession {
	return checkoutsession.And(checkoutsession.ExternalID(externalID), ownSessions(auth))
}

// SessionPage is one page of a merchant's sessions, newest first.
type SessionPage struct {
	Sessions []*ent.CheckoutSession
	ListPage
}

// ListSessions lists the caller's sessions in the caller's mode, newest
// first (ties by id, so pages never overlap).
func (s *Service) ListSessions(ctx context.Context, auth *MerchantAuth, p ListParams) (*SessionPage, error) {
	p, err := p.normalise()
	if err != nil {
		return nil, err
	}
	q := s.sessionClient(ctx).Query().Where(ownSessions(auth))
	total, err := q.Clone().Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting sessions: %w", err)
	}
	list, err := q.
		Order(ent.Desc(checkoutsession.FieldCreatedAt), ent.Desc(checkoutsession.FieldID)).
		Limit(p.Limit).
		Offset(p.Offset).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return &SessionPage{Sessions: list, ListPage: p.page(total, len(list))}, nil
}

// CancelSession cancels a session of the caller when cancellable allows it
// (design.md section 3: from pending and detecting, before expires_at, while
// no payment has been seen); cancelling a cancelled session changes
// nothing; anything else is ErrConflict. The session row is locked for the
// decision, so a payment recorded concurrently (under the
// same lock) either comes first and refuses the cancel, or comes after and
// finds the session cancelled (a late payment).
func (s *Service) CancelSession(ctx context.Context, auth *MerchantAuth, externalID string) (*ent.CheckoutSession, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	var out *ent.CheckoutSession
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sess, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(ownSession(auth, externalID))).Only(ctx)
		if ent.IsNotFound(err) {
			return errNoSuchSession
		}
		if err != nil {
			return fmt.Errorf("reading session: %w", err)
		}
		already, err := cancellable(sess, s.now(), func() (bool, error) { return hasLivePayment(ctx, tx.Payment, sess.ID) })
		if err != nil {
			return err
		}
		if already {
			out = sess
			return nil
		}
		out, err = tx.CheckoutSession.UpdateOne(sess).
			SetStatus(checkoutsession.StatusCancelled).
			SetCancelledAt(s.now().UTC().Truncate(time.Microsecond)).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("cancelling session: %w", err)
		}
		return s.publishSessionStatus(ctx, sqlTx, out.ExternalID, string(checkoutsession.StatusCancelled))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExpireSessions expires the sessions past expires_at that are still
// pending or detecting and whose seen payments do not cover the amount
// (design.md section 3): with nothing paid it sends session.expired; with
// an underpayment payment.failed (reason underpaid, amounts paid and
// expected) and then session.expired. A session whose seen payments cover
// the amount is left waiting for its confirmations. Each session is decided
// in its own transaction under its row lock. It answers how many sessions
// it expired.
func (s *Service) ExpireSessions(ctx context.Context) (int, error) {
	now := s.now().UTC()
	ids, err := s.cfg.DB.Ent.CheckoutSession.Query().
		Where(expiryDueAt(now)).
		Order(ent.Asc(checkoutsession.FieldExpiresAt)).
		Limit(1000).
		IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing expired sessions: %w", err)
	}
	n := 0
	for _, id := range ids {
		expired, err := s.expireSession(ctx, id)
		if err != nil {
			return n, err
		}
		if expired {
			n++
		}
	}
	return n, nil
}

func (s *Service) expireSession(ctx context.Context, id uuid.UUID) (bool, error) {
	expired := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sess, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(checkoutsession.ID(id))).Only(ctx)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if !expiryDue(sess, now) {
			return nil
		}
		decimals := int32(USDCDecimals)
		if sess.Chain != "" {
			if l, err := s.ledger(sessionMode(sess), chains.Name(sess.Chain)); err == nil {
				decimals = l.Decimals()
			}
		}
		seen, err := sessionPaid(ctx, tx, sess.ID, false)
		if err != nil {
			return err
		}
		due, err := ToBaseUnits("amount_usd", sess.AmountUsd, decimals)
		if err != nil {
			return err
		}
		if covers(seen, due) {
			return nil // paid in time: it waits for its confirmations
		}
		if _, err := tx.CheckoutSession.UpdateOne(sess).
			SetStatus(checkoutsession.StatusExpired).
			SetExpiredAt(now).
			Save(ctx); err != nil {
			return err
		}
		if err := s.publishSessionStatus(ctx, sqlTx, sess.ExternalID, string(checkoutsession.StatusExpired)); err != nil {
			return err
		}
		base := EventData{SessionExternalID: sess.ExternalID, Chain: sess.Chain, Token: sess.Token, Metadata: sess.Metadata}
		if seen.Sign() > 0 {
			paid := FromBaseUnits(seen, decimals)
			data := base
			data.AmountUSD = &paid
			data.Extra = map[string]any{
				"reason":              FailReasonUnderpaid,
				"amount_paid_usd":     paid,
				"amount_expected_usd": sess.AmountUsd,
				"amount_due_usd":      sess.AmountUsd.Sub(paid),
			}
			if err := recordSessionEvent(ctx, s, tx, sqlTx, sess, EventPaymentFailed, data); err != nil {
				return err
			}
		}
		expiredData := base
		amount := sess.AmountUsd
		expiredData.AmountUSD = &amount
		if err := recordSessionEvent(ctx, s, tx, sqlTx, sess, EventSessionExpired, expiredData); err != nil {
			return err
		}
		expired = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("expiring session %s: %w", id, err)
	}
	return expired, nil
}
