package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Payments: deposits found by the watcher (checkout_deposits.go) become Payment rows
// and move their session along spec 3.1 and design.md section 3:
//
//   - seen: the payment is recorded (status detected) and payment.detected
//     sent; when the session's seen payments cover its amount the session
//     goes detecting -> confirming. An underpaid session stays detecting
//     and keeps waiting for the rest until it expires.
//   - confirmations: the count is updated and published to status
//     subscribers (every payment write also drops the session from the
//     status caches, publishSessionChanged); the first confirmation moves the payment to confirming
//     and sends payment.confirming.
//   - final: the payment is confirmed; when the session's confirmed payments
//     cover its amount the session is confirmed and payment.confirmed sent
//     (an overpayment confirms too, the excess is in the event as
//     overpaid_usd).
//   - removed (reorg): the payment is failed and no longer counts; a
//     confirming session no longer covered goes back to detecting. If the
//     transfer is re-included it is seen again and counts again.
//
// A deposit below its chain's minimum worth counting is dust (checkout_dust.go):
// recorded once final, none of the above.
//
// A payment to a session that has ended (checkout_state.go: expired,
// cancelled or confirmed) is recorded with late=true (never lost, held for
// refund) and payment.failed sent with lateReason's reason; it never
// changes the session.
//
// Every change happens in the scan's transaction under the session's row
// lock (the lock CancelSession, SelectPaymentMethod and ExpireSessions
// take), with its events written by RecordEvent in the same transaction.
// Applying an event twice changes nothing: payments are unique by (chain,
// tx_hash, log_index) and every transition checks the current state.
//
// Confirming a session also queues the settlement of its payments
// (settle_payments.go) in the same transaction.

const (
	// Reasons of payment.failed.
	FailReasonLate        = "late"
	FailReasonAlreadyPaid = "already_paid"
	FailReasonUnderpaid   = "underpaid"
)

// depositTx is what applying one scan's events needs.
type depositTx struct {
	s        *Service
	tx       *ent.Tx
	sqlTx    *sql.Tx
	mode     Mode
	chain    chains.Name
	decimals int32
	// addrs maps a chain-normalised address to the stored one.
	addrs map[string]string
	// statuses are the payment statuses reached, for Config.Observer once
	// committed.
	statuses []string
	// internal: the events are an internal payment's (settle_internal.go),
	// which moves nothing to the deposit address: never dust (no sweep of
	// its own to pay for), and the address is left as it is.
	internal bool
	// changed are the sessions whose change publishSessionChanged
	// published in the transaction.
	changed map[string]bool
	// preloaded: das and absent were read for the scan's events in set
	// queries (preload), so apply looks them up in memory; unset, apply
	// queries per event (an internal payment, a relay: one event).
	preloaded bool
	// das are the deposit addresses of the events, by stored address.
	das map[string]*ent.DepositAddress
	// absent are the events' payment keys (chains.Deposit.Key) with no
	// payment row yet; record takes a key out when it creates the row.
	absent map[string]bool
	// merchants are the merchants of the events recorded in the
	// transaction, read by its first event of each (eventMerchant): a
	// payment's three events, or a scan's many of one merchant, read it
	// once. Nothing in the transaction changes a merchant.
	merchants map[uuid.UUID]*ent.Merchant
}

// preload reads, in set queries of inChunk values, the deposit addresses
// and the existing payments of a scan's events, so apply runs no lookup
// per event (at volume those were most of the scan's statements).
func (d *depositTx) preload(ctx context.Context, evs []chains.DepositEvent) error {
	d.preloaded, d.das, d.absent = true, map[string]*ent.DepositAddress{}, map[string]bool{}
	var addrs, hashes []string
	for _, ev := range evs {
		addrs = append(addrs, d.stored(ev.Deposit.To))
		hashes = append(hashes, ev.Deposit.TxHash)
		d.absent[ev.Deposit.Key()] = true
	}
	if err := chunks(uniq(addrs), func(part []string) error {
		rows, err := d.tx.DepositAddress.Query().
			Where(depositaddress.Chain(string(d.chain)), depositaddress.AddressIn(part...)).
			All(ctx)
		for _, r := range rows {
			d.das[r.Address] = r
		}
		return err
	}); err != nil {
		return fmt.Errorf("reading deposit addresses: %w", err)
	}
	return chunks(uniq(hashes), func(part []string) error {
		rows, err := d.tx.Payment.Query().
			Where(payment.Chain(string(d.chain)), payment.TxHashIn(part...)).
			Select(payment.FieldTxHash, payment.FieldLogIndex).
			All(ctx)
		for _, r := range rows {
			delete(d.absent, chains.Deposit{Chain: d.chain, TxHash: r.TxHash, Index: uint(r.LogIndex)}.Key())
		}
		if err != nil {
			return fmt.Errorf("reading payments: %w", err)
		}
		return nil
	})
}

// stored is a deposit's recipient as the deposit address is stored.
func (d *depositTx) stored(to string) string {
	if a, ok := d.addrs[d.s.wallets(d.chain).NormalizeAddress(to)]; ok {
		return a
	}
	return to
}

// reached notes a payment status change for the observer.
func (d *depositTx) reached(status payment.Status) { d.statuses = append(d.statuses, string(status)) }

// apply records one watcher event, as the note at the top of this file says.
func (d *depositTx) apply(ctx context.Context, ev chains.DepositEvent) error {
	if ev.Deposit.Amount == nil || ev.Deposit.Amount.Sign() <= 0 {
		// A transfer that moves nothing is no payment: anyone can send one
		// to any address for the price of gas, and as a payment it would
		// hold its session (no chain change, no cancel) and its settlement
		// (nothing to sweep) for ever. Watchers do not report them
		// (chains.Deposit); this keeps a watcher that does from doing harm.
		d.s.logger.WarnContext(ctx, "deposit without value ignored", "chain", d.chain, "to", ev.Deposit.To,
			"tx", ev.Deposit.TxHash, "amount", ev.Deposit.Amount)
		return nil
	}
	da, sess, err := d.depositSession(ctx, ev.Deposit)
	if da == nil || err != nil {
		return err
	}
	var p *ent.Payment
	if d.preloaded && d.absent[ev.Deposit.Key()] {
		err = &ent.NotFoundError{} // known absent: no lookup
	} else {
		p, err = d.tx.Payment.Query().
			Where(payment.Chain(string(d.chain)), payment.TxHash(ev.Deposit.TxHash), payment.LogIndex(int(ev.Deposit.Index))).
			Only(ctx)
	}
	if ent.IsNotFound(err) {
		if ev.Kind == chains.DepositRemoved {
			return nil // never recorded: nothing to undo
		}
		if !d.internal && d.s.isDust(d.chain, ev.Deposit.Amount, d.decimals) {
			// Below the chain's minimum worth counting: dust, recorded once
			// final and nothing more (checkout_dust.go).
			return d.recordDust(ctx, da, sess.Livemode, ev)
		}
		p, sess, err = d.record(ctx, sess, da, ev)
		if err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("reading payment: %w", err)
	}

	switch ev.Kind {
	case chains.DepositSeen:
		if p.Status == payment.StatusFailed {
			// Reorged out, now re-included: it counts again, unless the
			// session ended meanwhile (then it is late).
			upd := d.tx.Payment.UpdateOne(p).
				SetStatus(payment.StatusDetected).
				SetConfirmations(int(ev.Confirmations)).
				SetBlockNumber(int64(ev.Deposit.Block)).
				SetBlockHash(ev.Deposit.BlockHash)
			reason := lateReason(sess.Status)
			newlyLate := !p.Late && reason != ""
			if newlyLate {
				upd.SetLate(true)
			}
			if p, err = upd.Save(ctx); err != nil {
				return err
			}
			if err := d.publishSessionChanged(ctx, sess.ExternalID); err != nil {
				return err
			}
			d.reached(payment.StatusDetected)
			if p.Late {
				if !newlyLate {
					return nil // already reported late
				}
				data := d.eventData(sess, p)
				data.Extra = map[string]any{"reason": reason}
				return d.event(ctx, sess, EventPaymentFailed, data)
			}
			return d.refreshSeen(ctx, sess)
		}
		return nil
	case chains.DepositConfirmations:
		_, err := d.confirmations(ctx, sess, p, ev)
		return err
	case chains.DepositFinal:
		return d.final(ctx, sess, p, ev)
	case chains.DepositRemoved:
		if p.Status == payment.StatusFailed || p.Status == payment.StatusConfirmed {
			return nil
		}
		if _, err := d.tx.Payment.UpdateOne(p).SetStatus(payment.StatusFailed).SetConfirmations(0).Save(ctx); err != nil {
			return err
		}
		if err := d.publishSessionChanged(ctx, sess.ExternalID); err != nil {
			return err
		}
		d.reached(payment.StatusFailed)
		if p.Late || sess.Status != checkoutsession.StatusConfirming {
			return nil
		}
		seen, err := d.paid(ctx, sess.ID, false)
		if err != nil {
			return err
		}
		if !covers(seen, d.due(sess)) {
			return d.setStatus(ctx, sess, checkoutsession.StatusDetecting)
		}
		return nil
	}
	return nil
}

// depositSession is the deposit address dep was sent to, with its session
// locked for the transaction; nil, nil (logged) when the address is none
// of ours.
func (d *depositTx) depositSession(ctx context.Context, dep chains.Deposit) (*ent.DepositAddress, *ent.CheckoutSession, error) {
	stored := d.stored(dep.To)
	var (
		da  *ent.DepositAddress
		err error
	)
	if d.preloaded {
		if da = d.das[stored]; da == nil {
			err = &ent.NotFoundError{}
		}
	} else {
		da, err = d.tx.DepositAddress.Query().
			Where(depositaddress.Chain(string(d.chain)), depositaddress.Address(stored)).
			Only(ctx)
	}
	if ent.IsNotFound(err) {
		d.s.logger.WarnContext(ctx, "deposit to an unknown address", "chain", d.chain, "to", dep.To, "tx", dep.TxHash)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading deposit address: %w", err)
	}
	sess, err := store.ForUpdate(d.s.cfg.DB, d.tx.CheckoutSession.Query().Where(checkoutsession.ID(da.SessionID))).Only(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("locking session: %w", err)
	}
	return da, sess, nil
}

// record creates the payment of a deposit seen for the first time (or first
// reported by a later event) and sends payment.detected, or payment.failed
// when it is late.
func (d *depositTx) record(ctx context.Context, sess *ent.CheckoutSession, da *ent.DepositAddress, ev chains.DepositEvent) (*ent.Payment, *ent.CheckoutSession, error) {
	extID := vault.PaymentID.New()
	reason := lateReason(sess.Status)
	late := reason != ""
	units := ev.Deposit.Amount
	if units == nil || !units.IsInt64() || units.Sign() < 0 {
		return nil, nil, fmt.Errorf("deposit %s: amount %v out of range", ev.Deposit.Key(), units)
	}
	p, err := d.tx.Payment.Create().
		SetSessionID(sess.ID).
		SetDepositAddressID(da.ID).
		SetExternalID(extID).
		SetChain(string(d.chain)).
		SetToken(firstNonEmpty(sess.Token, TokenUSDC)).
		SetTxHash(ev.Deposit.TxHash).
		SetLogIndex(int(ev.Deposit.Index)).
		SetFromAddress(ev.Deposit.From).
		SetToAddress(da.Address).
		SetAmountToken(units.Int64()).
		SetAmountUsd(FromBaseUnits(units, d.decimals)).
		SetBlockNumber(int64(ev.Deposit.Block)).
		SetBlockHash(ev.Deposit.BlockHash).
		SetConfirmations(int(ev.Confirmations)).
		SetStatus(payment.StatusDetected).
		SetLate(late).
		Save(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("recording payment: %w", err)
	}
	delete(d.absent, ev.Deposit.Key())
	if err := d.publishSessionChanged(ctx, sess.ExternalID); err != nil {
		return nil, nil, err
	}
	// A new amount on the address: it is no longer swept (treasury_sweeps.go). An
	// internal payment puts nothing on it.
	if !d.internal {
		if err := d.tx.DepositAddress.Update().
			Where(depositaddress.ID(da.ID), depositaddress.Swept(true)).
			SetSwept(false).
			Exec(ctx); err != nil {
			return nil, nil, fmt.Errorf("recording payment: %w", err)
		}
	}
	d.reached(payment.StatusDetected)
	d.s.logger.InfoContext(ctx, "payment recorded", "session", sess.ExternalID, "payment", p.ExternalID,
		"chain", d.chain, "tx", p.TxHash, "amount", p.AmountUsd, "late", late)
	if late {
		data := d.eventData(sess, p)
		data.Extra = map[string]any{"reason": reason}
		if err := d.event(ctx, sess, EventPaymentFailed, data); err != nil {
			return nil, nil, err
		}
		return p, sess, nil
	}
	if err := d.event(ctx, sess, EventPaymentDetected, d.eventData(sess, p)); err != nil {
		return nil, nil, err
	}
	// refreshSeen leaves sess as it wrote it (setStatus): the session as
	// it now is, with no second read.
	if err := d.refreshSeen(ctx, sess); err != nil {
		return nil, nil, err
	}
	return p, sess, nil
}

// refreshSeen moves a waiting session to confirming when its seen payments
// cover the amount.
func (d *depositTx) refreshSeen(ctx context.Context, sess *ent.CheckoutSession) error {
	if !awaitingPayment(sess.Status) {
		return nil
	}
	seen, err := d.paid(ctx, sess.ID, false)
	if err != nil {
		return err
	}
	if !covers(seen, d.due(sess)) {
		// Still underpaid: the status is unchanged, but subscribers re-read
		// the amount paid.
		return d.s.publishSessionStatus(ctx, d.sqlTx, sess.ExternalID, string(sess.Status))
	}
	return d.setStatus(ctx, sess, checkoutsession.StatusConfirming)
}

// setStatus changes a session's status and publishes the change to status
// subscribers (after commit). sess becomes the row as written.
func (d *depositTx) setStatus(ctx context.Context, sess *ent.CheckoutSession, status checkoutsession.Status) error {
	updated, err := d.tx.CheckoutSession.UpdateOne(sess).SetStatus(status).Save(ctx)
	if err != nil {
		return fmt.Errorf("updating session: %w", err)
	}
	*sess = *updated
	return d.s.publishSessionStatus(ctx, d.sqlTx, sess.ExternalID, string(status))
}

// confirmations records a payment's confirmation count; it answers the
// payment as it now is.
func (d *depositTx) confirmations(ctx context.Context, sess *ent.CheckoutSession, p *ent.Payment, ev chains.DepositEvent) (*ent.Payment, error) {
	if p.Status != payment.StatusDetected && p.Status != payment.StatusConfirming {
		return p, nil
	}
	counted := p.Confirmations != int(ev.Confirmations)
	upd := d.tx.Payment.UpdateOne(p).SetConfirmations(int(ev.Confirmations))
	first := p.Status == payment.StatusDetected && ev.Confirmations > 0
	if first {
		upd.SetStatus(payment.StatusConfirming)
	}
	p, err := upd.Save(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.publishSessionChanged(ctx, sess.ExternalID); err != nil {
		return nil, err
	}
	if first {
		d.reached(payment.StatusConfirming)
	}
	if p.Late {
		return p, nil
	}
	if counted {
		// The status is unchanged, but subscribers re-read the count: the
		// hosted page's progress follows each confirmation.
		if err := d.s.publishSessionStatus(ctx, d.sqlTx, sess.ExternalID, string(sess.Status)); err != nil {
			return nil, err
		}
	}
	if !first {
		return p, nil
	}
	data := d.eventData(sess, p)
	data.Extra = map[string]any{"confirmations": ev.Confirmations, "required": ev.Required}
	return p, d.event(ctx, sess, EventPaymentConfirming, data)
}

func (d *depositTx) final(ctx context.Context, sess *ent.CheckoutSession, p *ent.Payment, ev chains.DepositEvent) error {
	if p.Status == payment.StatusConfirmed {
		return nil
	}
	now := d.s.now().UTC().Truncate(time.Microsecond)
	p, err := d.tx.Payment.UpdateOne(p).
		SetStatus(payment.StatusConfirmed).
		SetConfirmations(int(max(ev.Confirmations, ev.Required))).
		SetConfirmedAt(now).
		Save(ctx)
	if err != nil {
		return err
	}
	if err := d.publishSessionChanged(ctx, sess.ExternalID); err != nil {
		return err
	}
	d.reached(payment.StatusConfirmed)
	if p.Late {
		return nil
	}
	if sessionEnded(sess.Status) {
		return nil
	}
	confirmed, err := d.paid(ctx, sess.ID, true)
	if err != nil {
		return err
	}
	due := d.due(sess)
	if !covers(confirmed, due) {
		return nil
	}
	if _, err := d.tx.CheckoutSession.UpdateOne(sess).
		SetStatus(checkoutsession.StatusConfirmed).
		SetConfirmedAt(now).
		Save(ctx); err != nil {
		return err
	}
	if err := d.s.publishSessionStatus(ctx, d.sqlTx, sess.ExternalID, string(checkoutsession.StatusConfirmed)); err != nil {
		return err
	}
	data := d.eventData(sess, p)
	data.Extra = map[string]any{
		"amount_paid_usd":     FromBaseUnits(confirmed, d.decimals),
		"amount_expected_usd": sess.AmountUsd,
	}
	if excess := new(big.Int).Sub(confirmed, due); excess.Sign() > 0 {
		data.Extra["overpaid_usd"] = FromBaseUnits(excess, d.decimals)
	}
	if err := d.event(ctx, sess, EventPaymentConfirmed, data); err != nil {
		return err
	}
	return d.s.queueSettlements(ctx, d.tx, d.sqlTx, sess)
}

// due is the session amount in the token's base units (1 USDC = 1 USD).
func (d *depositTx) due(sess *ent.CheckoutSession) *big.Int {
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, d.decimals)
	if err != nil { // cannot happen: 2 decimals at most
		return sess.AmountUsd.Shift(d.decimals).BigInt()
	}
	return units
}

// paid sums the session's counting payments (not late, not reorged out):
// seen ones, or confirmed ones only.
func (d *depositTx) paid(ctx context.Context, sessionID uuid.UUID, confirmedOnly bool) (*big.Int, error) {
	return sessionPaid(ctx, d.tx, sessionID, confirmedOnly)
}

func sessionPaid(ctx context.Context, tx *ent.Tx, sessionID uuid.UUID, confirmedOnly bool) (*big.Int, error) {
	q := tx.Payment.Query().Where(payment.SessionID(sessionID), payment.Late(false), payment.StatusNEQ(payment.StatusFailed))
	if confirmedOnly {
		q = q.Where(payment.StatusEQ(payment.StatusConfirmed))
	}
	amounts, err := q.Select(payment.FieldAmountToken).Ints(ctx)
	if err != nil {
		return nil, fmt.Errorf("summing payments: %w", err)
	}
	sum := new(big.Int)
	for _, a := range amounts {
		sum.Add(sum, big.NewInt(int64(a)))
	}
	return sum, nil
}

func (d *depositTx) eventData(sess *ent.CheckoutSession, p *ent.Payment) EventData {
	return paymentEventData(sess, p, d.decimals)
}

// paymentEventData is the spec 6.3 data of an event about payment p.
func paymentEventData(sess *ent.CheckoutSession, p *ent.Payment, decimals int32) EventData {
	usd := p.AmountUsd
	tok := FromBaseUnits(big.NewInt(p.AmountToken), decimals)
	if isInternalRef(p.TxHash) {
		return EventData{
			SessionExternalID: sess.ExternalID, PaymentExternalID: p.ExternalID, AmountUSD: &usd, AmountToken: &tok,
			Token: p.Token, Chain: p.Chain, InternalReference: p.TxHash, FromAddress: p.FromAddress, Metadata: sess.Metadata,
		}
	}
	return EventData{
		SessionExternalID: sess.ExternalID,
		PaymentExternalID: p.ExternalID,
		AmountUSD:         &usd,
		AmountToken:       &tok,
		Token:             p.Token,
		Chain:             p.Chain,
		TxHash:            p.TxHash,
		FromAddress:       p.FromAddress,
		Metadata:          sess.Metadata,
	}
}

func (d *depositTx) event(ctx context.Context, sess *ent.CheckoutSession, kind string, data EventData) error {
	m := d.merchants[sess.MerchantID]
	if m == nil {
		var err error
		if m, err = eventMerchant(ctx, d.tx, sess.MerchantID); err != nil {
			return fmt.Errorf("recording %s: %w", kind, err)
		}
		if d.merchants == nil {
			d.merchants = map[uuid.UUID]*ent.Merchant{}
		}
		d.merchants[m.ID] = m
	}
	return recordMerchantSessionEvent(ctx, d.s, d.tx, d.sqlTx, m, sess, kind, data)
}

func recordSessionEvent(ctx context.Context, s *Service, tx *ent.Tx, sqlTx *sql.Tx, sess *ent.CheckoutSession, kind string, data EventData) error {
	return recordMerchantSessionEvent(ctx, s, tx, sqlTx, nil, sess, kind, data)
}

// recordMerchantSessionEvent records an event of sess; m is its merchant
// when already read in tx (nil: RecordEvent reads it).
func recordMerchantSessionEvent(ctx context.Context, s *Service, tx *ent.Tx, sqlTx *sql.Tx, m *ent.Merchant, sess *ent.CheckoutSession, kind string, data EventData) error {
	id := sess.ID
	_, err := s.RecordEvent(ctx, tx, sqlTx, EventInput{
		MerchantID: sess.MerchantID,
		SessionID:  &id,
		Type:       kind,
		Livemode:   sess.Livemode,
		Data:       data,
		merchant:   m,
	})
	if err != nil {
		return fmt.Errorf("recording %s: %w", kind, err)
	}
	return nil
}
