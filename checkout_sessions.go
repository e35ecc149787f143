package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/predicate"
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
		newRow := func(sessions *ent.CheckoutSessionClient) *ent.CheckoutSessionCreate {
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
				SetExpiresAt(now.Add(s.sessionTTL()))
		}
		// Outside a caller's transaction the row shares its commit with
		// the creates beside it (insertSession).
		insert := func(ctx context.Context) (*ent.CheckoutSession, error) {
			if tx := ent.TxFromContext(ctx); tx != nil {
				return newRow(tx.CheckoutSession).Save(ctx)
			}
			return s.insertSession(ctx, newRow(s.cfg.DB.Ent.CheckoutSession))
		}
		var sess *ent.CheckoutSession
		key := openSessionsKeyOf(auth)
		switch {
		case s.cfg.MaxOpenSessions <= 0: // no cap: the insert alone, one round trip
			sess, err = insert(ctx)
		case ent.TxFromContext(ctx) == nil && s.openSessionGrants.Take(key):
			// Headroom this process counted within the second (not inside
			// a caller's transaction: its row would stay invisible to
			// counts after Done, until that transaction commits).
			sess, err = insert(ctx)
			s.openSessionGrants.Done(key)
		default:
			err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				if err := s.checkOpenSessions(ctx, tx, sqlTx, auth, in.IdempotencyKey, now); err != nil {
					return err
				}
				var err error
				sess, err = newRow(tx.CheckoutSession).Save(ctx)
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
