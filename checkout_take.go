package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/relay"
	"agentpay/ent/transfer"
	"agentpay/internal/store"
)

// Taking a session for a payment.
//
// Three payers take a checkout session: the customer on the hosted page
// (SelectPaymentMethod), an agent paying from its custodial wallet
// (PayCheckout) and a relayed EIP-3009 authorization (PayWithAuthorization).
// Each takes it the same way, in takeSession: under the session's row
// lock, the session must be selectable (open, before its deadline, no live
// payment: checkout_state.go), the payer must be allowed beside the payments
// already under way (mayTakeSession, the one rule below), and the chain
// and token are selected (pending -> detecting, published to the page).
// The deposit address on a chain is found or allocated in one place,
// depositAddressOn.

// sessionPayer is who takes a session for a payment.
type sessionPayer string

const (
	payerCustomer sessionPayer = "customer"
	payerAgent    sessionPayer = "agent"
	payerRelay    sessionPayer = "relay"
	// payerSolana: a payer-signed Solana transaction the treasury
	// co-signs (x402's exact, MPP's solana charge; x402_svm.go).
	payerSolana sessionPayer = "solana"
)

// paymentsUnderWay are a session's payments begun and not ended, other
// than the taker's own: an agent's transfer not failed, a relay in flight;
// elsewhere names a chain other than the taker's that a relay in flight
// pays on ("" when none).
type paymentsUnderWay struct {
	agent, relay bool
	elsewhere    chains.Name
}

// mayTakeSession is the rule of who may take a session while others pay
// it:
//
//   - the customer may always select (and switch) the chain, even while an
//     agent or a relay pays: every address the session was given stays
//     watched (checkout_deposits.go), so a payment under way is found on its chain
//     whatever the page shows, and a page that refused would leave the
//     customer with no address at all;
//   - an agent or a relay may not while an agent pays: its transfer is
//     recorded and will land, and a second payer would pay the session
//     twice;
//   - an agent may not while a relay is in flight, for the same reason;
//   - a relay may while another relay is in flight on its chain: the
//     usual case is the same payer's authorization signed again after a
//     stuck relay, and each relay counts against its payer's balance
//     (checkout_relays.go);
//   - a relay or a Solana transaction may not while a payment is in flight
//     on another chain (an EVM authorization while a Solana transaction
//     is, or the reverse, or two EVM chains): nothing ties payments on two
//     chains together, so both would land and the session be paid twice.
//     It waits for the first one's outcome, as below;
//   - a Solana transaction may not while another relay or Solana
//     transaction is in flight (its own, the same transaction sent again,
//     is not another): nothing on chain ties two Solana transactions
//     together as an EIP-3009 nonce does, so a client that signs again
//     (a new blockhash) after a timeout, without a payment-identifier or
//     Idempotency-Key, would otherwise pay twice on two instances. It
//     waits for the first one's outcome: paid (the session is), failed
//     or expired (the row finishes, the session is payable again).
func mayTakeSession(payer sessionPayer, sess *ent.CheckoutSession, under paymentsUnderWay) error {
	switch {
	case payer == payerCustomer:
		return nil
	case under.agent:
		return fmt.Errorf("%w: session %s is already being paid by an agent", ErrConflict, sess.ExternalID)
	case payer == payerAgent && under.relay:
		return fmt.Errorf("%w: session %s is already being paid by a relayed authorization", ErrConflict, sess.ExternalID)
	case under.elsewhere != "":
		return fmt.Errorf("%w: session %s is already being paid on %s by a payment in flight; a payment on another chain is refused until that one is decided (paid, failed or expired): retry it then, or ask the session's status",
			ErrConflict, sess.ExternalID, under.elsewhere)
	case payer == payerSolana && under.relay:
		return fmt.Errorf("%w: session %s is already being paid by another transaction in flight; retry the same payment (or under its payment-identifier or Idempotency-Key) to learn its outcome, and sign a new one only if it failed", ErrConflict, sess.ExternalID)
	}
	return nil
}

// sessionTake is one take of a session.
type sessionTake struct {
	payer sessionPayer
	chain chains.Name
	token string
	// ownTransfer is the agent's transfer the take is for, recorded in the
	// same transaction: not another payment under way.
	ownTransfer *uuid.UUID
	// ownTx is the Solana transaction the take is for (its id): a relay
	// row of it in flight is this payment, sent again, not another.
	ownTx string
	// address: also find or allocate the session's deposit address on
	// chain (the page's selection answers it).
	address bool
}

// takenSession is a session taken, and its deposit address when asked for.
type takenSession struct {
	sess    *ent.CheckoutSession
	address *ent.DepositAddress
}

// takeSession takes the session for a payment, in ctx's transaction (or
// its own when ctx carries none), as the note above says.
func (s *Service) takeSession(ctx context.Context, sessionID uuid.UUID, take sessionTake) (*takenSession, error) {
	var out *takenSession
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		cur, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(checkoutsession.ID(sessionID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("locking session: %w", err)
		}
		now := s.now()
		if err := selectable(cur, now, func() (bool, error) { return hasLivePayment(ctx, tx.Payment, cur.ID) }); err != nil {
			return err
		}
		if take.payer != payerCustomer {
			under, err := s.paymentsUnderWay(ctx, tx, cur.ID, take.chain, take.ownTransfer, take.ownTx, now)
			if err != nil {
				return err
			}
			if err := mayTakeSession(take.payer, cur, under); err != nil {
				return err
			}
		}
		out = &takenSession{sess: cur}
		if take.address {
			if out.address, err = s.depositAddressOn(ctx, tx, sqlTx, cur.ID, take.chain); err != nil {
				return err
			}
		}
		if cur.Status == checkoutsession.StatusDetecting && cur.Chain == string(take.chain) && cur.Token == take.token {
			return nil
		}
		if out.sess, err = tx.CheckoutSession.UpdateOne(cur).
			SetChain(string(take.chain)).
			SetToken(take.token).
			SetStatus(checkoutsession.StatusDetecting).
			Save(ctx); err != nil {
			return fmt.Errorf("selecting %s: %w", take.chain, err)
		}
		return s.publishSessionStatus(ctx, sqlTx, cur.ExternalID, string(checkoutsession.StatusDetecting))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// paymentsUnderWay reads the session's payments under way but own, for a
// take on chain.
func (s *Service) paymentsUnderWay(ctx context.Context, tx *ent.Tx, sessionID uuid.UUID, chain chains.Name, own *uuid.UUID, ownTx string, now time.Time) (paymentsUnderWay, error) {
	agents := tx.Transfer.Query().Where(transfer.CheckoutSessionID(sessionID), transfer.StatusNEQ(transfer.StatusFailed))
	if own != nil {
		agents = agents.Where(transfer.IDNEQ(*own))
	}
	agent, err := agents.Exist(ctx)
	if err != nil {
		return paymentsUnderWay{}, fmt.Errorf("reading agent payments: %w", err)
	}
	relays := tx.Relay.Query().Where(relay.SessionID(sessionID),
		relay.StatusIn(relay.StatusPending, relay.StatusSubmitted), relay.InFlightUntilGT(now.UTC()))
	if ownTx != "" {
		relays = relays.Where(relay.Not(relay.And(relay.Chain(string(chains.Solana)), relay.Nonce(ownTx))))
	}
	inFlight, err := relays.Select(relay.FieldChain).Strings(ctx)
	if err != nil {
		return paymentsUnderWay{}, fmt.Errorf("reading relays: %w", err)
	}
	out := paymentsUnderWay{agent: agent, relay: len(inFlight) > 0}
	for _, c := range inFlight {
		if c != string(chain) {
			out.elsewhere = chains.Name(c)
			break
		}
	}
	return out, nil
}

// depositAddressOn is the session's deposit address on chain: the newest
// one the session has there (a page reload does not burn an index), else
// a new one. The caller holds the session's lock, so one address is
// allocated per chain however many ask at once; errIndexTaken asks the
// caller to run its transaction again.
func (s *Service) depositAddressOn(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, sessionID uuid.UUID, chain chains.Name) (*ent.DepositAddress, error) {
	da, err := tx.DepositAddress.Query().
		Where(depositaddress.SessionID(sessionID), depositaddress.Chain(string(chain))).
		Order(ent.Desc(depositaddress.FieldCreatedAt)).
		First(ctx)
	if ent.IsNotFound(err) {
		return s.allocateDepositAddress(ctx, tx, sqlTx, sessionID, chain)
	}
	return da, err
}

// retryIndexTaken runs f again while it fails with errIndexTaken (two
// allocations raced for one derivation index), at most 5 more times.
func retryIndexTaken(f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if errors.Is(err, errIndexTaken) && attempt < 5 {
			continue
		}
		return err
	}
}

// sessionByExternalID is the session a payer names, with its merchant:
// ErrNotFound when there is none.
func (s *Service) sessionByExternalID(ctx context.Context, externalID string) (*ent.CheckoutSession, error) {
	sess, err := s.cfg.DB.Ent.CheckoutSession.Query().
		Where(checkoutsession.ExternalID(externalID)).
		WithMerchant().
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, sessionNotFound(externalID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", externalID, err)
	}
	return sess, nil
}
