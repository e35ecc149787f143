package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"math/big"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/relay"
	"agentpay/internal/ratelimit"
)

// What the treasury risks on a payer's authorization (docs/security.md,
// relays). The treasury pays the gas of every authorization it relays
// (checkout_authorized_payments.go: a session's x402 payment, the browser wallet's
// authorization, the facilitator's settle), whether the transaction moves
// the value or reverts. So before one is broadcast:
//
//   - In flight: the payer's authorizations being relayed on the chain
//     count against its balance, by the no-overdraft rule sends use
//     (transfer_available.go): each relay is recorded (a Relay row) under a lock per
//     payer, chain and mode (a transaction advisory lock on PostgreSQL;
//     SQLite's single writer) once the payer's balance, less its relays
//     in flight, covers it. So of many authorizations from one payer at
//     once, in one process or several, only those the balance covers go
//     out; the others are refused (ErrInsufficientFunds) before any gas.
//     A relay is in flight from its record until its transaction is seen
//     included (succeeded or reverted) or refused unsent (dropped), and at
//     most until the authorization's validBefore or RelayInFlightFor after
//     it was recorded, whichever comes first (a relay whose outcome this
//     process never learnt, a crash, stops holding the balance then).
//   - Reverts: a payer with RelayRevertLimit relays reverted within
//     RelayRevertWindow (Solana transactions that failed on chain
//     included: their fee is the treasury's too, x402_svm.go) is refused
//     (a *RateLimitError naming until when)
//     until the oldest of them is RelayRevertWindow old. What makes a
//     relay revert once the in-flight count holds is the payer spending
//     its balance elsewhere in the same block (it pays that gas itself):
//     each address can cost the treasury RelayRevertLimit reverts' gas an
//     hour.
//   - Rates: relays are counted per client IP (Config.RelayIPRateLimit a
//     minute: the payer's own requests to a session's x402 address or the
//     wallet's POST; counted before any work) and per merchant and mode
//     (Config.RelayMerchantRateLimit a minute, counted once the
//     authorization is verified and before it is recorded, so refused or
//     replayed ones do not use up a merchant's budget), on the shared
//     limiter (across instances). The facilitator's caller is the merchant
//     itself (its secret key), so its settles count per merchant only.

const (
	// DefaultRelayIPRateLimit is RELAY_IP_RATE_LIMIT's default: a payer
	// pays a session with one relay; an x402 client paying a resource every
	// few seconds stays under it.
	DefaultRelayIPRateLimit = 20
	// DefaultRelayMerchantRateLimit is RELAY_MERCHANT_RATE_LIMIT's default:
	// two relayed payments a second, sustained, per merchant and mode.
	DefaultRelayMerchantRateLimit = 120
	// RelayInFlightFor is the longest a relay counts as in flight: far
	// more than inclusion takes, and a relay whose outcome was never
	// learnt (a crash) frees the payer's balance after it.
	RelayInFlightFor = 10 * time.Minute
	// RelayRevertLimit relays of one payer reverted within
	// RelayRevertWindow stop its relays until the oldest of them is that
	// old.
	RelayRevertLimit  = 3
	RelayRevertWindow = time.Hour
)

// relayOutflows are a payer's relays on one chain in one mode
// (transfer_available.go), as seen by a relay of the authorization whose nonce is
// nonce: an earlier relay of that same authorization does not count
// against it (the token moves its value once, whoever relays it and
// however often), so a payer may submit again one whose relay was left
// in flight (a node error, a crash).
type relayOutflows struct {
	livemode bool
	chain    chains.Name
	payer    string
	nonce    string
	now      time.Time
}

func (r relayOutflows) query(db *ent.Client) *ent.RelayQuery {
	return db.Relay.Query().Where(relay.Livemode(r.livemode), relay.Chain(string(r.chain)), relay.Payer(r.payer))
}

func (r relayOutflows) recorded(ctx context.Context, db *ent.Client) (int, error) {
	n, err := r.query(db).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay: counting relays: %w", err)
	}
	return n, nil
}

func (r relayOutflows) inFlight(ctx context.Context, db *ent.Client) (int64, error) {
	n, err := r.query(db).Where(relay.StatusIn(relay.StatusPending, relay.StatusSubmitted), relay.InFlightUntilGT(r.now), relay.NonceNEQ(r.nonce)).
		Aggregate(func(sel *entsql.Selector) string {
			return "COALESCE(SUM(" + sel.C(relay.FieldValue) + "), 0)"
		}).Int(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay: summing relays in flight: %w", err)
	}
	return int64(n), nil
}

// relayPayer is the payer of auth as t's chain writes addresses.
func (s *Service) relayPayer(t *authorizedTarget, auth chains.Authorization) string {
	return s.wallets(t.chain).NormalizeAddress(auth.From)
}

// relayOutflowsOf are the relays of auth's payer on t's chain and mode.
func (s *Service) relayOutflowsOf(t *authorizedTarget, auth chains.Authorization) relayOutflows {
	return relayOutflows{livemode: t.mode == ModeLive, chain: t.chain, payer: s.relayPayer(t, auth), nonce: relayNonce(auth), now: s.now().UTC()}
}

// recordRelay records auth as a relay in flight once its payer's available
// balance covers it and its payer is not refused for reverts, under the
// payer's lock, in the transaction that takes the session for the relay
// (takeSession). Refusals record nothing and change nothing.
func (s *Service) recordRelay(ctx context.Context, t *authorizedTarget, auth chains.Authorization) (*ent.Relay, error) {
	if !auth.Value.IsInt64() {
		return nil, Invalid("authorization.value", "is out of range")
	}
	value := auth.Value.Int64()
	of := s.relayOutflowsOf(t, auth)
	s.settleRelaysInFlight(ctx, t, of)
	var row *ent.Relay
	err := recordWithinBalance(ctx, s,
		func(ctx context.Context, db *ent.Client) (available, error) {
			return s.readAvailable(ctx, db, t.ledger, auth.From, of)
		},
		func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
			return s.lockRelayPayer(ctx, sqlTx, of)
		},
		func(ctx context.Context, tx *ent.Tx, _ *sql.Tx, a available) error {
			if err := s.checkRelayReverts(ctx, tx.Client(), of.livemode, of.payer); err != nil {
				return err
			}
			if a.units < value {
				return relayShortfall(of, t, a.units, value)
			}
			if _, err := s.takeSession(ctx, t.sess.ID, sessionTake{payer: payerRelay, chain: t.chain, token: TokenUSDC}); err != nil {
				return err
			}
			until := of.now.Add(RelayInFlightFor)
			if vb := auth.ValidBefore; vb.IsInt64() && vb.Int64() < until.Unix() {
				until = time.Unix(vb.Int64(), 0).UTC()
			}
			// An earlier relay of this authorization still in flight is
			// this one now: it stops counting, so the payer's other
			// authorizations see the value once.
			if err := tx.Relay.Update().
				Where(relay.Livemode(of.livemode), relay.Chain(string(of.chain)), relay.Payer(of.payer), relay.Nonce(of.nonce),
					relay.StatusIn(relay.StatusPending, relay.StatusSubmitted)).
				SetStatus(relay.StatusDropped).SetFinishedAt(of.now).
				Exec(ctx); err != nil {
				return fmt.Errorf("relay: superseding an earlier relay: %w", err)
			}
			var err error
			row, err = tx.Relay.Create().
				SetLivemode(of.livemode).
				SetChain(string(of.chain)).
				SetPayer(of.payer).
				SetNonce(relayNonce(auth)).
				SetValue(value).
				SetMerchantID(t.sess.MerchantID).
				SetSessionID(t.sess.ID).
				SetInFlightUntil(until).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("relay: recording: %w", err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return row, nil
}

// relayShortfall is the refusal of an authorization its payer's available
// balance does not cover.
func relayShortfall(of relayOutflows, t *authorizedTarget, availableUnits, value int64) error {
	dec := t.ledger.Decimals()
	return fmt.Errorf("%w: %s USDC needed, available: %s USDC of %s on %s (its authorizations being relayed count as spent)",
		ErrInsufficientFunds, usd(FromBaseUnits(big.NewInt(value), dec)),
		usd(FromBaseUnits(big.NewInt(max(availableUnits, 0)), dec)), of.payer, of.chain)
}

func relayNonce(auth chains.Authorization) string {
	return fmt.Sprintf("0x%x", auth.Nonce)
}

// lockRelayPayer serialises the relays of one payer on one chain and mode
// (a transaction advisory lock on PostgreSQL; SQLite's single writer): the
// relay's lock of the no-overdraft rule, the payer holding no row of ours.
func (s *Service) lockRelayPayer(ctx context.Context, sqlTx *sql.Tx, of relayOutflows) error {
	if !s.cfg.DB.IsPostgres() {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("agentpay relay payer "))
	h.Write([]byte(fmt.Sprintf("%t %s %s", of.livemode, of.chain, of.payer)))
	if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("relay: locking payer: %w", err)
	}
	return nil
}

// checkRelayReverts refuses a payer with RelayRevertLimit relays reverted
// within RelayRevertWindow (in the mode, on any chain: an EVM authorization
// whose relay reverted, a Solana transaction that failed on chain), until
// the oldest of them is RelayRevertWindow old.
func (s *Service) checkRelayReverts(ctx context.Context, db *ent.Client, livemode bool, payer string) error {
	now := s.now().UTC()
	reverts, err := db.Relay.Query().
		Where(relay.Livemode(livemode), relay.Payer(payer), relay.StatusEQ(relay.StatusReverted),
			relay.FinishedAtGT(now.Add(-RelayRevertWindow))).
		Order(ent.Desc(relay.FieldFinishedAt)).
		Limit(RelayRevertLimit).
		All(ctx)
	if err != nil {
		return fmt.Errorf("relay: reading reverts: %w", err)
	}
	if len(reverts) < RelayRevertLimit {
		return nil
	}
	until := reverts[len(reverts)-1].FinishedAt.Add(RelayRevertWindow)
	return &RateLimitError{
		Decision: RateDecision{Limit: RelayRevertLimit, Reset: until, RetryAfter: until.Sub(now), Window: "relay reverts"},
		limit: fmt.Sprintf("%d payments of %s relayed within %s reverted on chain, each at the treasury's cost of gas or fee: its payments are not relayed until %s",
			RelayRevertLimit, payer, RelayRevertWindow, until.Format(time.RFC3339)),
	}
}

// relaySent records that the relay went out as txHash.
func (s *Service) relaySent(ctx context.Context, row *ent.Relay, txHash string) {
	if err := s.cfg.DB.Ent.Relay.UpdateOne(row).
		Where(relay.StatusEQ(relay.StatusPending)).
		SetStatus(relay.StatusSubmitted).SetTxHash(txHash).
		Exec(ctx); err != nil && !ent.IsNotFound(err) {
		// The row stays pending: in flight until it expires, which errs
		// on the side of refusing the payer's next authorization.
		s.logger.WarnContext(ctx, "relay: recording the broadcast", "relay", row.ID, "tx", txHash, "err", err)
	}
}

// relayDropped records that the relay was refused before any broadcast:
// no gas spent, nothing in flight.
func (s *Service) relayDropped(ctx context.Context, row *ent.Relay) {
	if err := s.cfg.DB.Ent.Relay.UpdateOne(row).
		Where(relay.StatusEQ(relay.StatusPending)).
		SetStatus(relay.StatusDropped).SetFinishedAt(s.now().UTC()).
		Exec(ctx); err != nil && !ent.IsNotFound(err) {
		s.logger.WarnContext(ctx, "relay: recording a refusal", "relay", row.ID, "err", err)
	}
}

// relayIncluded records the outcome of the authorization's relays still in
// flight once txHash, which carries it, is included: succeeded, or
// reverted (which counts towards the payer's refusal, checkRelayReverts).
func (s *Service) relayIncluded(ctx context.Context, t *authorizedTarget, auth chains.Authorization, txHash string, reverted bool) {
	status := relay.StatusSucceeded
	if reverted {
		status = relay.StatusReverted
	}
	of := s.relayOutflowsOf(t, auth)
	if _, err := s.cfg.DB.Ent.Relay.Update().
		Where(relay.Livemode(of.livemode), relay.Chain(string(of.chain)), relay.Payer(of.payer), relay.Nonce(relayNonce(auth)),
			relay.StatusIn(relay.StatusPending, relay.StatusSubmitted)).
		SetStatus(status).SetTxHash(txHash).SetFinishedAt(of.now).
		Save(ctx); err != nil {
		s.logger.WarnContext(ctx, "relay: recording the outcome", "tx", txHash, "reverted", reverted, "err", err)
	}
}

// settleRelaysInFlight learns the outcome of the payer's broadcast relays
// whose request stopped waiting before inclusion (answered pending), so a
// revert counts and an included one stops holding the balance. Best
// effort, a node read per relay, at most relaySettleMax of them.
func (s *Service) settleRelaysInFlight(ctx context.Context, t *authorizedTarget, of relayOutflows) {
	rows, err := of.query(s.cfg.DB.Ent).
		Where(relay.StatusEQ(relay.StatusSubmitted), relay.InFlightUntilGT(of.now), relay.TxHashNotNil()).
		Order(ent.Desc(relay.FieldCreatedAt)).
		Limit(relaySettleMax).
		All(ctx)
	if err != nil {
		s.logger.WarnContext(ctx, "relay: reading relays in flight", "payer", of.payer, "err", err)
		return
	}
	for _, row := range rows {
		rc, err := t.ledger.Receipt(ctx, row.TxHash)
		if err != nil || (rc.State != chains.TxIncluded && rc.State != chains.TxFailed) {
			continue
		}
		status := relay.StatusSucceeded
		if rc.State == chains.TxFailed {
			status = relay.StatusReverted
		}
		if err := s.cfg.DB.Ent.Relay.UpdateOne(row).Where(relay.StatusEQ(relay.StatusSubmitted)).
			SetStatus(status).SetFinishedAt(of.now).Exec(ctx); err != nil && !ent.IsNotFound(err) {
			s.logger.WarnContext(ctx, "relay: recording the outcome", "relay", row.ID, "err", err)
		}
	}
}

// relaySettleMax bounds the node reads settleRelaysInFlight makes.
const relaySettleMax = 10

// relayRateScheme counts relays in one window of a minute.
func relayRateScheme(name string, limit int) ratelimit.Scheme {
	w := ratelimit.Window{Name: "minute", Seconds: 60, Limit: limit}
	return ratelimit.Scheme{Name: name, IDType: "text", Windows: func(string) []ratelimit.Window { return []ratelimit.Window{w} }}
}

// relayLimits count relays (allowRelayFrom, allowRelayFor).
type relayLimits struct {
	ips       *ratelimit.Limit[string]
	merchants *ratelimit.Limit[string]
}

func newRelayLimits(cfg Config, limiter *ratelimit.Limiter) relayLimits {
	return relayLimits{
		ips:       ratelimit.NewLimit[string](limiter, relayRateScheme("relay_ip", cfg.RelayIPRateLimit), nil),
		merchants: ratelimit.NewLimit[string](limiter, relayRateScheme("relay_merchant", cfg.RelayMerchantRateLimit), nil),
	}
}

// allowRelayFrom counts one relay request from a client IP (IPv6 per /64)
// against Config.RelayIPRateLimit a minute; a refusal is a
// *RateLimitError. An empty ip (a merchant's facilitator call) is not
// counted here.
func (s *Service) allowRelayFrom(ctx context.Context, ip string) error {
	if ip == "" || s.cfg.RelayIPRateLimit <= 0 {
		return nil
	}
	dec, err := s.rates.relays.ips.Allow(ctx, ratelimit.Subject[string]{ID: ipScope(ip)})
	return rateRefusal(dec, err, "relayed authorizations", " from this address")
}

// allowRelayFor counts one relay of the merchant's session in mode against
// Config.RelayMerchantRateLimit a minute; a refusal is a *RateLimitError.
func (s *Service) allowRelayFor(ctx context.Context, merchantID uuid.UUID, mode Mode) error {
	if s.cfg.RelayMerchantRateLimit <= 0 {
		return nil
	}
	dec, err := s.rates.relays.merchants.Allow(ctx, ratelimit.Subject[string]{ID: merchantID.String() + "/" + string(mode)})
	return rateRefusal(dec, err, "relayed authorizations", fmt.Sprintf(" of one merchant's %s sessions", mode))
}
