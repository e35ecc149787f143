package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/relay"
	"agentpay/internal/idempotency"
	"agentpay/x402"
)

// x402 v2's exact scheme on Solana (docs/agent-commerce.md, x402 on
// Solana; chains/solana/exact.go for the transaction's rules).
//
// The payer signs a whole transaction: a TransferChecked of the amount due
// from its token account to the session's Solana deposit address's, with
// the session's external id as its memo and the treasury as fee payer
// (extra.feePayer), whose signature it leaves empty. The treasury checks
// it, co-signs and submits it, so a payer holding USDC and no SOL pays.
// Once included, the payment is recorded through the deposit scan's code
// path, as a relayed authorization's is (checkout_authorized_payments.go): one
// payment of the session, payment.detected, confirmations, settlement.
//
// Once by construction: the transaction's id is the treasury's signature
// of its message, deterministic, so the same payload settled again is the
// same transaction (answered, not sent twice), and the chain runs an id
// at most once. A payer that signs again (a new blockhash) under the same
// payment-identifier gets the first transaction's payment (x402_id.go: the
// id keeps the first transaction). Two different transactions without an
// id: the second is refused while the session has a payment, or while the
// first is in flight, on any instance: each transaction is recorded as a
// relay in flight under the session's row lock before it is sent
// (recordSolanaExact, mayTakeSession), and finishes with its outcome.
//
// Networks: x402 clients name Solana's clusters by CAIP-2 (solana: and
// the first 32 characters of the genesis hash) and know three. The network
// offered is the cluster the node is on, by the genesis hash it answered
// at start, never assumed from the mode: live mode only on mainnet-beta,
// test mode on devnet or testnet; a node on any other cluster (a local
// validator, mainnet under a test configuration) is not offered, and a
// payload naming another cluster is refused (invalid_network). The network
// is not part of what the payer signs (the blockhash ties a transaction to
// its cluster), so without this check the name could point a client at
// one cluster while the treasury settled on another.

// x402SolanaNetworks are the clusters each mode may be offered on.
var x402SolanaNetworks = map[Mode][]string{
	ModeLive: {x402.SolanaMainnet},
	ModeTest: {x402.SolanaDevnet, x402.SolanaTestnet},
}

// x402SolanaSettler is mode's Solana ledger as an exact settler, with the
// network it is offered as (its node's cluster); false when Solana is not
// configured in mode or its node is on no cluster the mode may offer.
func (s *Service) x402SolanaSettler(mode Mode) (chains.ExactSettler, chains.Ledger, string, bool) {
	ledger, err := s.ledger(mode, chains.Solana)
	if err != nil {
		return nil, nil, "", false
	}
	cluster, ok := ledger.(interface{ GenesisHash() string })
	if !ok {
		return nil, nil, "", false
	}
	network := x402.SolanaNetwork(cluster.GenesisHash())
	if !slices.Contains(x402SolanaNetworks[mode], network) {
		return nil, nil, "", false
	}
	settler, ok := ledger.(chains.ExactSettler)
	if !ok {
		return nil, nil, "", false
	}
	return settler, ledger, network, true
}

// x402SolanaOffer is the session's Solana requirement, when the merchant
// accepts USDC on Solana and it is configured in the session's mode.
func (s *Service) x402SolanaOffer(ctx context.Context, sess *ent.CheckoutSession) (*x402.Requirements, error) {
	settler, ledger, network, ok := s.x402SolanaSettler(sessionMode(sess))
	if !ok || !merchantAccepts(sess.Edges.Merchant, chains.Solana, TokenUSDC) {
		return nil, nil
	}
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals())
	if err != nil {
		return nil, err
	}
	da, err := s.sessionDepositAddress(ctx, sess, chains.Solana)
	if err != nil {
		return nil, err
	}
	return &x402.Requirements{
		Scheme: x402.SchemeExact, Network: network, Amount: units.String(), Asset: ledger.Token(),
		PayTo: da.Address, MaxTimeoutSeconds: x402MaxTimeoutSeconds,
		Extra: x402.Extra{FeePayer: settler.FeePayer(), Memo: sess.ExternalID},
	}, nil
}

// x402SVMRefusal is a Solana payload refused, with x402's reason.
type x402SVMRefusal struct {
	v      *ValidationError
	reason string
}

func (e *x402SVMRefusal) Error() string { return e.v.Error() }
func (e *x402SVMRefusal) Unwrap() error { return e.v }

// solanaExactError maps a settler's refusal to the service's errors.
func solanaExactError(err error) error {
	if reason, ok := chains.X402ReasonOf(err); ok {
		msg := err.Error()
		if i := strings.Index(msg, "x402 exact: "); i >= 0 {
			msg = msg[i+len("x402 exact: "):]
		}
		return &x402SVMRefusal{v: &ValidationError{Field: "payload.transaction", Message: msg}, reason: reason}
	}
	if errors.Is(err, chains.ErrInsufficientFunds) {
		return fmt.Errorf("%w: the payer's token account holds less than the amount due", ErrInsufficientFunds)
	}
	return err
}

// solanaExactTarget is what a Solana payment of sess must pay.
type solanaExactTarget struct {
	t       *authorizedTarget
	settler chains.ExactSettler
	network string
	req     chains.ExactRequest
}

// solanaExactTargetOf checks the payload's envelope against the session
// and finds what it must pay: the session's deposit address on Solana
// (allocated as a selection would), the amount due, its memo.
func (s *Service) solanaExactTargetOf(ctx context.Context, sess *ent.CheckoutSession, p *x402.PaymentPayload) (*solanaExactTarget, error) {
	mode := sessionMode(sess)
	if p.X402Version != x402.Version2 {
		return nil, Invalid("x402Version", "must be %d", x402.Version2)
	}
	if p.Accepted.Scheme != x402.SchemeExact {
		return nil, Invalid("accepted.scheme", "must be %q", x402.SchemeExact)
	}
	if _, _, network, ok := s.x402SolanaSettler(mode); !ok || p.Accepted.Network != network {
		return nil, Invalid("accepted.network", "%q is not a %s-mode network offered", p.Accepted.Network, mode)
	}
	if p.Payload.Transaction == "" {
		return nil, Invalid("payload.transaction", "is required: the payer-signed transaction, base64")
	}
	if _, err := x402PaymentID(p); err != nil {
		return nil, err
	}
	return s.solanaSessionTarget(ctx, sess)
}

// solanaSessionTarget is what a Solana payment of sess must pay, whichever
// dialect carries it (x402's exact, MPP's solana charge): the session's
// deposit address on Solana (allocated as a selection would), the amount
// due, its memo.
func (s *Service) solanaSessionTarget(ctx context.Context, sess *ent.CheckoutSession) (*solanaExactTarget, error) {
	mode := sessionMode(sess)
	settler, ledger, network, ok := s.x402SolanaSettler(mode)
	if !ok {
		return nil, Invalid("chain", "solana is not offered in %s mode", mode)
	}
	if !sess.Edges.Merchant.Active {
		return nil, fmt.Errorf("%w: merchant is deactivated", ErrForbidden)
	}
	if !merchantAccepts(sess.Edges.Merchant, chains.Solana, TokenUSDC) {
		return nil, Invalid("chain", "solana %s is not accepted by this merchant", TokenUSDC)
	}
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals())
	if err != nil {
		return nil, err
	}
	t := &authorizedTarget{sess: sess, mode: mode, chain: chains.Solana, ledger: ledger, units: units}
	if sessionOpen(sess, s.now()) {
		t.payTo, err = s.sessionDepositAddress(ctx, sess, chains.Solana)
	} else {
		// A closed session gets no new address; a retry of its payment
		// needs the one it was paid at.
		t.payTo, err = s.cfg.DB.Ent.DepositAddress.Query().Where(
			depositaddress.SessionID(sess.ID), depositaddress.Chain(string(chains.Solana)),
		).Order(ent.Desc(depositaddress.FieldCreatedAt)).First(ctx)
		if ent.IsNotFound(err) {
			return nil, selectable(sess, s.now(), nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return &solanaExactTarget{t: t, settler: settler, network: network,
		req: chains.ExactRequest{PayTo: t.payTo.Address, Amount: units, Memo: sess.ExternalID}}, nil
}

// payX402Solana settles a Solana exact payload for sess, under its
// payment-identifier when it carries one, else under idemKey when set (an
// Idempotency-Key: ACP's complete).
func (s *Service) payX402Solana(ctx context.Context, sess *ent.CheckoutSession, clientIP string, p *x402.PaymentPayload, idemKey string) (*AuthorizedPayment, error) {
	st, err := s.solanaExactTargetOf(ctx, sess, p)
	if err != nil {
		return nil, err
	}
	id, _ := x402PaymentID(p)
	var key *sessionPaymentKey
	switch {
	case id != "":
		k := x402IDName(id)
		key = &k
	case idemKey != "":
		k := idempotencyKeyName(idemKey)
		key, id = &k, idemKey
	}
	return s.paySolanaExact(ctx, st, clientIP, p.Payload.Transaction, key, id, nil, nil)
}

// paySolanaExact settles a payer-signed transaction paying st's session,
// as the payment key names when key is set (x402's payment-identifier,
// MPP's Idempotency-Key: one key of the session whichever dialect carries
// it, x402_id.go), id being the key's value. unsent, when set, refuses a
// transaction not yet sent rather than sending it (an expired MPP
// challenge: only the outcome of a payment already made is answered);
// payerCheck, when set, refuses a transaction whose payer (its transfer's
// authority) is not the one the request names (MPP's source).
func (s *Service) paySolanaExact(ctx context.Context, st *solanaExactTarget, clientIP, transaction string, key *sessionPaymentKey, id string, unsent error, payerCheck func(payer string) error) (*AuthorizedPayment, error) {
	checked, err := st.settler.VerifyExact(ctx, transaction, st.req)
	if err != nil && checked.Payer == "" {
		return nil, solanaExactError(err)
	}
	if payerCheck != nil {
		// The transfer's authority, read from the transaction: what the
		// credential says of its payer must be it (MPP's source).
		if err := payerCheck(checked.Payer); err != nil {
			return nil, err
		}
	}
	pay := func() (*AuthorizedPayment, error) {
		switch {
		case unsent != nil && !checked.Known:
			return nil, unsent
		case err != nil:
			return nil, solanaExactError(err)
		}
		return s.settleSolanaExact(ctx, st, clientIP, transaction, checked)
	}
	if key == nil {
		return pay()
	}
	r := idempotency.Request{
		Scope: x402IDScope(st.t.sess.ID), Key: id, Operation: x402PaymentOperation,
		Canonical: x402Fingerprinted{Network: st.network, From: checked.Payer, To: st.req.PayTo, Value: st.req.Amount.String()},
	}
	first := &x402PaymentAnswer{Chain: string(chains.Solana), Transaction: transaction}
	return s.payIdentifiedBy(ctx, *key, r, first, pay, func(kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error) {
		return s.replaySolanaExact(ctx, st, clientIP, kept, mayRelay)
	})
}

// settleSolanaExact co-signs and submits a verified transaction (or
// answers the one already sent), waits for it and records the payment.
func (s *Service) settleSolanaExact(ctx context.Context, st *solanaExactTarget, clientIP, transaction string, checked chains.ExactChecked) (*AuthorizedPayment, error) {
	t := st.t
	if checked.Known {
		return s.awaitSolanaExact(ctx, st, checked, true)
	}
	if err := s.allowRelayFrom(ctx, clientIP); err != nil {
		return nil, err
	}
	release, err := s.sessionRelays.Lock(ctx, t.sess.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	sess, err := s.cfg.DB.Ent.CheckoutSession.Get(ctx, t.sess.ID)
	if err != nil {
		return nil, fmt.Errorf("x402 solana: reading session: %w", err)
	}
	if err := selectable(sess, s.now(), func() (bool, error) { return hasLivePayment(ctx, s.cfg.DB.Ent.Payment, sess.ID) }); err != nil {
		return nil, err
	}
	// A payer that is an agent's own wallet pays under its humans'
	// spending policies, as on EVM (agent_policies.go).
	if err := s.checkRelayedPayer(ctx, checked.Payer, t.sess); err != nil {
		return nil, err
	}
	if err := s.allowRelayFor(ctx, sess.MerchantID, t.mode); err != nil {
		return nil, err
	}
	s.settleSolanaInFlight(ctx, t)
	row, err := s.recordSolanaExact(ctx, st, checked)
	if err != nil {
		return nil, err
	}
	sub, err := st.settler.SettleExact(ctx, transaction, st.req)
	if sub.AccountTx != "" {
		// The deposit's token account the treasury opened: its fee and
		// rent are the treasury's, like the payment's fee.
		s.recordRelayGas(ctx, t.mode, t.ledger, sub.AccountTx)
	}
	if err != nil && sub.TxHash == "" {
		s.relayDropped(ctx, row)
		return nil, solanaExactError(err)
	}
	s.relaySent(ctx, row, sub.TxHash)
	if err != nil {
		// Sent or not, unknown: the id is the transaction's, answered
		// pending; the scan records it if it lands.
		s.logger.WarnContext(ctx, "x402 solana: sending", "session", sess.ExternalID, "tx", sub.TxHash, "err", err)
	}
	s.afterBroadcast("relay")
	s.logger.InfoContext(ctx, "x402 solana payment submitted", "session", sess.ExternalID, "tx", sub.TxHash, "payer", checked.Payer)
	return s.awaitSolanaExact(ctx, st, chains.ExactChecked{Payer: checked.Payer, TxHash: sub.TxHash}, false)
}

// SolanaExactInFlightFor is how long a Solana transaction sent for a
// session counts as in flight when its outcome is not learnt (a crash, a
// request that stopped waiting): a transaction lands only while its
// blockhash is valid, 150 slots (about a minute), so after this it never
// will.
const SolanaExactInFlightFor = 2 * time.Minute

// recordSolanaExact takes the session for the transaction and records it
// as a relay in flight (a Relay row: chain solana, its id as nonce and tx
// hash), in one transaction under the session's row lock, before anything
// is sent: on every instance, a second transaction for the session is
// refused while this one is in flight (mayTakeSession), so a client that
// signs again without a key cannot pay twice. The row finishes with the
// outcome (solanaExactFinished); a crash leaves it to expire.
func (s *Service) recordSolanaExact(ctx context.Context, st *solanaExactTarget, checked chains.ExactChecked) (*ent.Relay, error) {
	t := st.t
	if !st.req.Amount.IsInt64() {
		return nil, Invalid("amount", "is out of range")
	}
	var row *ent.Relay
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		// A transaction that fails on chain costs the treasury its fee as a
		// reverted EVM relay costs its gas: the payer's failures count
		// against the same limit (checkRelayReverts; the rows' status is
		// reverted either way, solanaExactFinished).
		if err := s.checkRelayReverts(ctx, tx.Client(), t.sess.Livemode, checked.Payer); err != nil {
			return err
		}
		if _, err := s.takeSession(ctx, t.sess.ID, sessionTake{payer: payerSolana, chain: chains.Solana, token: TokenUSDC, ownTx: checked.TxHash}); err != nil {
			return err
		}
		now := s.now().UTC()
		// This transaction sent before (a retry): the new row is it.
		if err := tx.Relay.Update().
			Where(relay.Chain(string(chains.Solana)), relay.Nonce(checked.TxHash), relay.StatusIn(relay.StatusPending, relay.StatusSubmitted)).
			SetStatus(relay.StatusDropped).SetFinishedAt(now).
			Exec(ctx); err != nil {
			return fmt.Errorf("x402 solana: superseding an earlier send: %w", err)
		}
		var err error
		row, err = tx.Relay.Create().
			SetLivemode(t.sess.Livemode).
			SetChain(string(chains.Solana)).
			SetPayer(checked.Payer).
			SetNonce(checked.TxHash).
			SetTxHash(checked.TxHash).
			SetValue(st.req.Amount.Int64()).
			SetMerchantID(t.sess.MerchantID).
			SetSessionID(t.sess.ID).
			SetInFlightUntil(now.Add(SolanaExactInFlightFor)).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("x402 solana: recording the send: %w", err)
		}
		return nil
	})
	return row, err
}

// solanaExactFinished records the outcome of the transaction's sends still
// in flight: succeeded, reverted (failed on chain: nothing paid, the fee
// the treasury's) or dropped (expired unsent).
func (s *Service) solanaExactFinished(ctx context.Context, txHash string, status relay.Status) {
	if _, err := s.cfg.DB.Ent.Relay.Update().
		Where(relay.Chain(string(chains.Solana)), relay.Nonce(txHash), relay.StatusIn(relay.StatusPending, relay.StatusSubmitted)).
		SetStatus(status).SetFinishedAt(s.now().UTC()).
		Save(ctx); err != nil {
		s.logger.WarnContext(ctx, "x402 solana: recording the outcome", "tx", txHash, "status", status, "err", err)
	}
}

// settleSolanaInFlight learns the outcome of the session's Solana
// transactions in flight whose request stopped waiting (answered pending,
// or its process died): one that failed on chain stops holding the
// session. Best effort, a node read each.
func (s *Service) settleSolanaInFlight(ctx context.Context, t *authorizedTarget) {
	rows, err := s.cfg.DB.Ent.Relay.Query().
		Where(relay.SessionID(t.sess.ID), relay.Chain(string(chains.Solana)), relay.StatusIn(relay.StatusPending, relay.StatusSubmitted),
			relay.InFlightUntilGT(s.now().UTC()), relay.TxHashNotNil()).
		Limit(relaySettleMax).All(ctx)
	if err != nil {
		s.logger.WarnContext(ctx, "x402 solana: reading transactions in flight", "session", t.sess.ExternalID, "err", err)
		return
	}
	for _, row := range rows {
		if rc, err := t.ledger.Receipt(ctx, row.TxHash); err == nil && rc.State == chains.TxFailed {
			s.solanaExactFinished(ctx, row.TxHash, relay.StatusReverted)
		}
	}
}

// awaitSolanaExact waits for the transaction to be included, records its
// deposit as the session's payment and answers it.
func (s *Service) awaitSolanaExact(ctx context.Context, st *solanaExactTarget, checked chains.ExactChecked, replayed bool) (*AuthorizedPayment, error) {
	t := st.t
	out := &AuthorizedPayment{
		Session: t.sess, Chain: chains.Solana, TxHash: checked.TxHash, Payer: checked.Payer, PayTo: t.payTo.Address,
		AmountUSD: FromBaseUnits(t.units, t.ledger.Decimals()), Status: "pending", Replayed: replayed,
	}
	if n, ok := s.networks(t.mode)[chains.Solana]; ok {
		out.Required = n.Confirmations
	}
	waitCtx, cancel := context.WithTimeout(ctx, DefaultSendWait)
	defer cancel()
	rc, err := t.ledger.Wait(waitCtx, checked.TxHash)
	switch {
	case err != nil && ctx.Err() == nil && waitCtx.Err() != nil:
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("x402 solana: waiting for %s: %w", checked.TxHash, err)
	case rc.State == chains.TxUnknown:
		// Expired unsent (or dropped): nothing moved.
		s.solanaExactFinished(ctx, checked.TxHash, relay.StatusDropped)
		return nil, Invalid("payload.transaction", "transaction %s did not land before its blockhash expired: sign again", checked.TxHash)
	}
	if !replayed {
		s.recordRelayGas(ctx, t.mode, t.ledger, checked.TxHash)
	}
	if rc.State == chains.TxFailed {
		s.solanaExactFinished(ctx, checked.TxHash, relay.StatusReverted)
		out.Status = "failed"
		return out, nil
	}
	if err := s.recordAuthorizedPayment(ctx, t, checked.TxHash, t.units); err != nil {
		return nil, err
	}
	s.solanaExactFinished(ctx, checked.TxHash, relay.StatusSucceeded)
	return s.authorizedPaymentOf(ctx, out)
}

// replaySolanaExact answers a retry under a payment-identifier from the
// transaction the id keeps: its payment once on chain, pending while it
// is in flight, sent again (the same transaction) while its blockhash
// lasts when mayRelay; one that expired unsent named no payment.
func (s *Service) replaySolanaExact(ctx context.Context, st *solanaExactTarget, clientIP string, kept *x402PaymentAnswer, mayRelay bool) (*AuthorizedPayment, error) {
	// The kept transaction passed its own dialect's layout when it was
	// kept; a retry in the other dialect answers it all the same.
	lax := *st
	lax.req.AnyComputeOrder = true
	st = &lax
	checked, err := st.settler.VerifyExact(ctx, kept.Transaction, st.req)
	switch {
	case checked.Known:
		return s.awaitSolanaExact(ctx, st, checked, true)
	case !mayRelay && checked.TxHash != "":
		return &AuthorizedPayment{
			Session: st.t.sess, Chain: chains.Solana, TxHash: checked.TxHash, Payer: checked.Payer, PayTo: st.t.payTo.Address,
			AmountUSD: FromBaseUnits(st.t.units, st.t.ledger.Decimals()), Status: "pending", Replayed: true,
		}, nil
	case err != nil:
		if reason, _ := chains.X402ReasonOf(err); reason != "" {
			return nil, fmt.Errorf("%w: the transaction the payment-identifier names can no longer be sent (%v); a new payment needs a new id", ErrConflict, err)
		}
		return nil, solanaExactError(err)
	}
	res, err := s.settleSolanaExact(ctx, st, clientIP, kept.Transaction, checked)
	if res != nil {
		res.Replayed = true
	}
	return res, err
}

// solanaFacilitatorTarget finds the merchant's session whose Solana
// deposit address is payTo, in the key's mode.
func (s *Service) solanaFacilitatorSession(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (*ent.CheckoutSession, error) {
	pr, pp := req.PaymentRequirements, &req.PaymentPayload
	if req.X402Version != x402.Version2 {
		return nil, Invalid("x402Version", "must be %d", x402.Version2)
	}
	if pr.Scheme != x402.SchemeExact || pp.Accepted.Scheme != x402.SchemeExact {
		return nil, Invalid("paymentRequirements.scheme", "must be %q", x402.SchemeExact)
	}
	if pr.Network != pp.Accepted.Network || pr.Amount != pp.Accepted.Amount || pr.PayTo != pp.Accepted.PayTo || pr.Asset != pp.Accepted.Asset {
		return nil, Invalid("paymentPayload.accepted", "must be the requirements' network, amount, asset and payTo")
	}
	_, ledger, network, ok := s.x402SolanaSettler(m.Mode)
	if !ok || pr.Network != network {
		return nil, Invalid("paymentRequirements.network", "%q is not a %s-mode network offered", pr.Network, m.Mode)
	}
	if pr.Asset != ledger.Token() {
		return nil, Invalid("paymentRequirements.asset", "must be the USDC mint of %s, %s", pr.Network, ledger.Token())
	}
	if len(pr.PayTo) > 64 {
		return nil, Invalid("paymentRequirements.payTo", "is not a deposit address of an open session of yours")
	}
	da, err := s.cfg.DB.Ent.DepositAddress.Query().Where(
		depositaddress.Chain(string(chains.Solana)), depositaddress.Address(pr.PayTo),
		depositaddress.HasSessionWith(checkoutsession.MerchantID(m.Merchant.ID), checkoutsession.Livemode(m.Livemode())),
	).First(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: payTo %s is not a deposit address of a %s-mode session of yours", ErrNotFound, pr.PayTo, m.Mode)
	}
	if err != nil {
		return nil, fmt.Errorf("x402: reading deposit addresses: %w", err)
	}
	sess, err := s.sessionByExternalID(ctx, da.QuerySession().OnlyX(ctx).ExternalID)
	if err != nil {
		return nil, err
	}
	if pr.Amount != "" {
		if units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals()); err == nil && units.String() != pr.Amount {
			return nil, Invalid("paymentRequirements.amount", "must be the session's amount due, %s base units", units)
		}
	}
	return sess, nil
}

// x402SolanaVerify is the facilitator's verify of a Solana payload.
func (s *Service) x402SolanaVerify(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (*x402.VerifyResponse, error) {
	out := &x402.VerifyResponse{Payer: s.x402PayerOf(&req.PaymentPayload)}
	sess, err := s.solanaFacilitatorSession(ctx, m, req)
	var st *solanaExactTarget
	if err == nil {
		st, err = s.solanaExactTargetOf(ctx, sess, &req.PaymentPayload)
	}
	if err == nil {
		var checked chains.ExactChecked
		checked, err = st.settler.VerifyExact(ctx, req.PaymentPayload.Payload.Transaction, st.req)
		switch {
		case err != nil:
			err = solanaExactError(err)
		case checked.Failed:
			err = &x402SVMRefusal{v: &ValidationError{Field: "payload.transaction",
				Message: fmt.Sprintf("transaction %s failed on chain: nothing was paid; sign a new payment", checked.TxHash)}, reason: "invalid_transaction_state"}
		case !checked.Known:
			err = selectable(sess, s.now(), func() (bool, error) { return hasLivePayment(ctx, s.cfg.DB.Ent.Payment, sess.ID) })
			if err == nil {
				err = s.checkRelayedPayer(ctx, checked.Payer, sess)
			}
			if err == nil {
				// What settle will refuse for the treasury's sake, as on EVM.
				err = s.checkRelayReverts(ctx, s.cfg.DB.Ent, sess.Livemode, checked.Payer)
			}
		}
	}
	return x402Verdict(out, err)
}

// x402SolanaSettle is the facilitator's settle of a Solana payload.
func (s *Service) x402SolanaSettle(ctx context.Context, m *MerchantAuth, req *x402.FacilitatorRequest) (*x402.SettleResponse, error) {
	network := req.PaymentPayload.Accepted.Network
	sess, err := s.solanaFacilitatorSession(ctx, m, req)
	if err == nil {
		var res *AuthorizedPayment
		if res, err = s.payX402Solana(ctx, sess, "", &req.PaymentPayload, ""); err == nil {
			return settleResponse(network, res), nil
		}
	}
	reason, ok := X402Reason(err)
	if !ok {
		return nil, err
	}
	return &x402.SettleResponse{ErrorReason: reason, Network: network, Payer: s.x402PayerOf(&req.PaymentPayload)}, nil
}
