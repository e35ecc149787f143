package agentpay

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
)

// Payments by relayed authorization (docs/agent-commerce.md, x402).
//
// A payer who holds USDC but no gas signs an EIP-3009
// TransferWithAuthorization of the session's exact amount to the session's
// deposit address (an x402 client, a browser wallet), and the service's
// treasury relays it, paying the gas. The payer's signature is the whole
// of their part: the service holds no key of theirs.
//
// Everything is checked before any gas is spent, and a refusal changes
// nothing: the session (known, open, of the chain's mode, not paid or
// being paid by an agent), the chain (EVM, accepted by the merchant,
// configured for the session's mode), the recipient (the session's deposit
// address on that chain, found or allocated as the hosted page's selection
// does), the value (the amount due exactly, in base units: the deposit
// address must receive what the session asks, no more, no less), and what
// the token itself will check (the ledger's VerifyAuthorization: the
// signature under the token's EIP-712 domain, the validity window with a
// margin for inclusion, the nonce unused, the payer's balance); then what
// the treasury risks (checkout_relays.go): the relay rates, the payer's reverts,
// and its balance less its authorizations already being relayed, under a
// lock per payer.
//
// Then, in the transaction that records the relay, the session is taken
// as a customer's selection takes it (pending or detecting -> detecting
// on the chain); the treasury broadcasts
// transferWithAuthorization, and once the transaction is included (waited
// for up to Wait) the payment is recorded at once from the known
// transaction, through the deposit scan's own code path, exactly as an
// agent's checkout payment is (agent_checkout.go): the deposit read by the
// ledger's DepositsIn, applied as a DepositSeen event, so payment.detected,
// the session's move to confirming, its subscription and later
// confirmations and settlement are those of any payment.
//
// Idempotent and crash-safe without a row of its own: the chain is the
// record. The EIP-3009 nonce lets the transfer happen at most once,
// whoever relays it and however often. A submission of an authorization
// already used answers the payment it made (FindTransfer locates the
// transaction, the payment is recorded if the scan has not yet done so:
// payments are unique by chain, tx hash and log index). A crash after the
// broadcast leaves a transfer to a watched deposit address, which the scan
// records as it records any customer's payment; the payer's retry answers
// it. One more guard: relays for one session are serialised in this
// process, and each re-checks under the session's lock that the session
// has no payment, so two different authorizations for one session do not
// both go out from one instance. (Two instances relaying two different
// payers' authorizations for one session at the same instant can both
// land; the second is then an overpayment of the session, handled as any
// customer's second payment is.)

// AuthorizedPaymentRequest is a payer-signed payment of a checkout session.
type AuthorizedPaymentRequest struct {
	ExternalID string
	// Chain is the EVM chain the authorization is for.
	Chain         string
	Authorization TransferAuthorization
	// Wait bounds how long the relay waits for inclusion; 0 means
	// DefaultSendWait. A payment not included by then is answered pending.
	Wait time.Duration
	// ClientIP is the address of the payer's client, whose relays are
	// limited (checkout_relays.go); empty when the caller is the merchant itself
	// (the facilitator), whose relays count per merchant only.
	ClientIP string
}

// TransferAuthorization is an EIP-3009 TransferWithAuthorization as JSON
// carries it (x402's exact payload, a wallet's typed-data message):
// addresses 0x-hex, amounts and times decimal strings, nonce 32 bytes and
// signature 65 bytes in 0x-hex.
type TransferAuthorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
	Signature   string `json:"signature"`
}

// AuthorizedPayment is a relayed payment as answered to the payer.
type AuthorizedPayment struct {
	Session *ent.CheckoutSession
	// Payment is the session's payment made by the authorization; nil
	// while the transaction is not included (Status pending).
	Payment   *ent.Payment
	Chain     chains.Name
	TxHash    string
	Payer     string
	PayTo     string
	AmountUSD decimal.Decimal
	// Status: pending (broadcast, not yet included), detected, confirming,
	// confirmed, or failed.
	Status        string
	Confirmations int
	// Required is the confirmations the chain needs.
	Required uint64
	// Replayed: the authorization had been relayed before (by this
	// request's earlier attempt, or anyone); this answers what it did.
	Replayed bool
}

// parse reads the authorization's fields, each bounded, into the chain's
// form; errors name the field.
func (a TransferAuthorization) parse() (chains.Authorization, error) {
	out := chains.Authorization{From: strings.TrimSpace(a.From), To: strings.TrimSpace(a.To)}
	for _, f := range []struct{ name, v string }{{"authorization.from", out.From}, {"authorization.to", out.To}} {
		if len(f.v) != 42 || !strings.HasPrefix(f.v, "0x") || !isHex(f.v[2:]) {
			return out, Invalid(f.name, "must be a 0x-prefixed 20-byte hex address")
		}
	}
	var err error
	if out.Value, err = parseUint256("authorization.value", a.Value); err != nil {
		return out, err
	}
	if out.ValidAfter, err = parseUint256("authorization.validAfter", a.ValidAfter); err != nil {
		return out, err
	}
	if out.ValidBefore, err = parseUint256("authorization.validBefore", a.ValidBefore); err != nil {
		return out, err
	}
	nonce, err := parseHexBytes("authorization.nonce", a.Nonce, 32)
	if err != nil {
		return out, err
	}
	copy(out.Nonce[:], nonce)
	if out.Signature, err = parseHexBytes("signature", a.Signature, 65); err != nil {
		return out, err
	}
	return out, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s)%2 == 0
}

// parseUint256 reads a decimal string of at most 78 digits.
func parseUint256(field, s string) (*big.Int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 78 || strings.TrimLeft(s, "0123456789") != "" {
		return nil, Invalid(field, "must be a non-negative integer as a decimal string")
	}
	v, _ := new(big.Int).SetString(s, 10)
	if v.BitLen() > 256 {
		return nil, Invalid(field, "must fit in a uint256")
	}
	return v, nil
}

// parseHexBytes reads 0x-hex of exactly n bytes.
func parseHexBytes(field, s string, n int) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) != 2+2*n || !strings.HasPrefix(s, "0x") {
		return nil, Invalid(field, "must be %d bytes as 0x-prefixed hex", n)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, Invalid(field, "must be %d bytes as 0x-prefixed hex", n)
	}
	return b, nil
}

// authorizedTarget is what a payer's authorization must match: the
// session, its chain's relayer and the deposit address and amount due.
type authorizedTarget struct {
	sess    *ent.CheckoutSession
	mode    Mode
	chain   chains.Name
	relayer chains.AuthorizationRelayer
	ledger  chains.Ledger
	payTo   *ent.DepositAddress
	units   *big.Int
}

// authorizedTargetOf loads the session and checks the chain: known
// session (ErrNotFound), active merchant (ErrForbidden), an EVM chain the
// merchant accepts and the session's mode configures (ValidationError).
// It allocates the deposit address when the session has none there yet,
// as the hosted page's selection would.
func (s *Service) authorizedTargetOf(ctx context.Context, externalID, chain string) (*authorizedTarget, error) {
	if externalID == "" || len(externalID) > SessionExternalIDMaxLen {
		return nil, Invalid("external_id", "must be 1 to %d characters long", SessionExternalIDMaxLen)
	}
	name, err := chains.ParseName(chain)
	if err != nil {
		return nil, Invalid("chain", "%s", err)
	}
	if !name.IsEVM() {
		return nil, Invalid("chain", "%s has no EIP-3009 authorizations: base, arbitrum, ethereum or polygon", name)
	}
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, err
	}
	m := sess.Edges.Merchant
	if !m.Active {
		return nil, fmt.Errorf("%w: merchant is deactivated", ErrForbidden)
	}
	mode := sessionMode(sess)
	if !merchantAccepts(m, name, TokenUSDC) {
		return nil, Invalid("chain", "%s %s is not accepted by this merchant", name, TokenUSDC)
	}
	ledger, err := s.ledger(mode, name)
	if err != nil {
		return nil, err
	}
	relayer, ok := ledger.(chains.AuthorizationRelayer)
	if !ok {
		return nil, Invalid("chain", "%s does not relay authorizations", name)
	}
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, ledger.Decimals())
	if err != nil {
		return nil, err
	}
	t := &authorizedTarget{sess: sess, mode: mode, chain: name, relayer: relayer, ledger: ledger, units: units}
	if !sessionOpen(sess, s.now()) {
		// A closed session gets no new address; a replay needs none.
		return t, nil
	}
	if t.payTo, err = s.sessionDepositAddress(ctx, sess, name); err != nil {
		return nil, err
	}
	return t, nil
}

// PayWithAuthorization relays a payer-signed authorization paying the
// session, as the note above says. Refusals change nothing: unknown
// session ErrNotFound; malformed input, a chain not accepted or not EVM,
// a recipient other than the deposit address, a value other than the
// amount due, a bad signature, a validity window that does not hold:
// ValidationError; the payer's balance short, its authorizations being
// relayed counted as spent: ErrInsufficientFunds; the session not open,
// paid or being paid, or the nonce used by a transfer that is not this
// payment: ErrConflict; a deactivated merchant ErrForbidden; past the
// relay rates, or a payer refused for its reverts: a *RateLimitError
// (checkout_relays.go).
func (s *Service) PayWithAuthorization(ctx context.Context, req AuthorizedPaymentRequest) (*AuthorizedPayment, error) {
	auth, err := req.Authorization.parse()
	if err != nil {
		return nil, err
	}
	if err := s.allowRelayFrom(ctx, req.ClientIP); err != nil {
		return nil, err
	}
	t, err := s.authorizedTargetOf(ctx, req.ExternalID, req.Chain)
	if err != nil {
		return nil, err
	}
	// One relay of the session at a time in this process (the note
	// above); the session's entry is forgotten once released.
	release, err := s.sessionRelays.Lock(ctx, t.sess.ID)
	if err != nil {
		return nil, err
	}
	defer release()

	// Already relayed (a retry, or another instance): answer what it did.
	if res, done, err := s.replayAuthorization(ctx, t, auth); done || err != nil {
		return res, err
	}
	if err := s.matchAuthorization(ctx, t, auth); err != nil {
		return nil, err
	}
	if err := s.allowRelayFor(ctx, t.sess.MerchantID, t.mode); err != nil {
		return nil, err
	}
	// The payer's relays in flight count against its balance, and the
	// session is taken, in one transaction under the payer's lock
	// (checkout_relays.go).
	row, err := s.recordRelay(ctx, t, auth)
	if err != nil {
		return nil, err
	}
	sub, err := t.relayer.RelayAuthorization(ctx, auth)
	if err != nil && chains.AuthorizationRefusal(err) != nil {
		// Refused before any broadcast: no gas spent.
		s.relayDropped(ctx, row)
	}
	if errors.Is(err, chains.ErrAlreadyUsed) {
		// Used between the check and the relay: by whom tells.
		if res, done, err := s.replayAuthorization(ctx, t, auth); done || err != nil {
			return res, err
		}
	}
	if err != nil {
		return nil, authorizationError(err)
	}
	s.afterBroadcast("relay")
	s.relaySent(ctx, row, sub.TxHash)
	s.logger.InfoContext(ctx, "authorized payment relayed", "session", t.sess.ExternalID, "chain", t.chain,
		"tx", sub.TxHash, "payer", auth.From)
	return s.awaitAuthorizedPayment(ctx, t, auth, sub.TxHash, waitOrDefault(req.Wait), false)
}

// VerifyAuthorizedPayment runs every check PayWithAuthorization runs before
// relaying, and changes nothing beyond the deposit address a selection
// would allocate: what x402's verify answers.
func (s *Service) VerifyAuthorizedPayment(ctx context.Context, req AuthorizedPaymentRequest) error {
	auth, err := req.Authorization.parse()
	if err != nil {
		return err
	}
	t, err := s.authorizedTargetOf(ctx, req.ExternalID, req.Chain)
	if err != nil {
		return err
	}
	if err := selectable(t.sess, s.now(), func() (bool, error) { return hasLivePayment(ctx, s.cfg.DB.Ent.Payment, t.sess.ID) }); err != nil {
		return err
	}
	if err := s.matchAuthorization(ctx, t, auth); err != nil {
		return err
	}
	// What recordRelay will check, read without its lock.
	of := s.relayOutflowsOf(t, auth)
	if err := s.checkRelayReverts(ctx, s.cfg.DB.Ent, of.livemode, of.payer); err != nil {
		return err
	}
	a, err := s.readAvailable(ctx, s.cfg.DB.Ent, t.ledger, auth.From, of)
	if err != nil {
		return err
	}
	if a.units < auth.Value.Int64() {
		return relayShortfall(of, t, a.units, auth.Value.Int64())
	}
	return nil
}

// matchAuthorization checks auth against what the session asks and what
// the token will check.
func (s *Service) matchAuthorization(ctx context.Context, t *authorizedTarget, auth chains.Authorization) error {
	if err := selectable(t.sess, s.now(), nil); err != nil {
		return err
	}
	w := s.wallets(t.chain)
	if w.NormalizeAddress(auth.To) != w.NormalizeAddress(t.payTo.Address) {
		return Invalid("authorization.to", "must be the session's deposit address on %s, %s", t.chain, t.payTo.Address)
	}
	if auth.Value.Cmp(t.units) != 0 {
		return Invalid("authorization.value", "must be the amount due exactly, %s base units (%s USDC), not %s",
			t.units, usd(t.sess.AmountUsd), auth.Value)
	}
	if err := t.relayer.VerifyAuthorization(ctx, auth); err != nil {
		return authorizationError(err)
	}
	// A payer that is an agent's own wallet pays under its humans'
	// spending policies (agent_policies.go).
	return s.checkRelayedPayer(ctx, auth.From, t.sess)
}

// authorizationError maps a ledger's refusal to the service's errors.
func authorizationError(err error) error {
	ae := chains.AuthorizationRefusal(err)
	if ae == nil {
		return err
	}
	switch ae.Reason {
	case chains.AuthorizationUsed:
		return fmt.Errorf("%w: %s", ErrConflict, ae.Message)
	case chains.AuthorizationInsufficient:
		return fmt.Errorf("%w: %s", ErrInsufficientFunds, ae.Message)
	case chains.AuthorizationMalformed:
		return Invalid("authorization", "%s", ae.Message)
	case chains.AuthorizationSignature:
		return Invalid("signature", "%s", ae.Message)
	}
	return Invalid("authorization", "%s", ae.Message)
}

// replayAuthorization answers an authorization already used on chain:
// done with the payment it made when it paid this session (recorded now
// if the scan has not yet), ErrConflict when it moved something else;
// not done when it is unused.
//
// Two reads decide "unused": the transfer looked for, then the nonce's
// state. A relay of auth included between them (another request's, or
// another instance's) shows as used without a transfer found; the
// transfer is looked for once more before anything is called a conflict,
// so a retry racing its own first relay gets the payment, not 409.
func (s *Service) replayAuthorization(ctx context.Context, t *authorizedTarget, auth chains.Authorization) (*AuthorizedPayment, bool, error) {
	q := chains.TransferQuery{From: auth.From, To: auth.To, Amount: auth.Value, Ref: auth.Nonce}
	used, found, err := t.ledger.FindTransfer(ctx, q)
	if err != nil {
		return nil, false, fmt.Errorf("authorized payment: looking for an earlier relay: %w", err)
	}
	if !found {
		if err := t.relayer.VerifyAuthorization(ctx, auth); !errors.Is(err, chains.ErrAlreadyUsed) {
			return nil, false, nil
		}
		// Used: by this authorization's transfer, included since the
		// first read, or by another.
		if used, found, err = t.ledger.FindTransfer(ctx, q); err != nil {
			return nil, false, fmt.Errorf("authorized payment: looking for an earlier relay: %w", err)
		}
		if !found {
			return nil, false, fmt.Errorf("%w: nonce %x of %s was already used by another transfer", ErrConflict, auth.Nonce, auth.From)
		}
	}
	// Used, and it moved the value to auth.To: this session's payment if
	// auth.To is one of its deposit addresses.
	addrs, err := s.cfg.DB.Ent.DepositAddress.Query().Where(
		depositaddress.SessionID(t.sess.ID), depositaddress.Chain(string(t.chain)),
	).All(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("authorized payment: reading deposit addresses: %w", err)
	}
	var da *ent.DepositAddress
	w := s.wallets(t.chain)
	for _, a := range addrs {
		if w.NormalizeAddress(a.Address) == w.NormalizeAddress(auth.To) {
			da = a
		}
	}
	if da == nil {
		return nil, false, fmt.Errorf("%w: nonce %x of %s was already used by a transfer to %s, not a deposit address of session %s",
			ErrConflict, auth.Nonce, auth.From, auth.To, t.sess.ExternalID)
	}
	t.payTo = da
	res, err := s.awaitAuthorizedPayment(ctx, t, auth, used, 0, true)
	return res, true, err
}

// awaitAuthorizedPayment waits up to wait for the relay txHash to be
// included, records its deposit as the session's payment (as the scan
// would) and answers it.
func (s *Service) awaitAuthorizedPayment(ctx context.Context, t *authorizedTarget, auth chains.Authorization, txHash string, wait time.Duration, replayed bool) (*AuthorizedPayment, error) {
	out := &AuthorizedPayment{
		Session: t.sess, Chain: t.chain, TxHash: txHash, Payer: auth.From, PayTo: t.payTo.Address,
		AmountUSD: FromBaseUnits(auth.Value, t.ledger.Decimals()), Status: "pending", Replayed: replayed,
	}
	if n, ok := s.networks(t.mode)[t.chain]; ok {
		out.Required = n.Confirmations
	}
	waitCtx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	rc, err := t.ledger.Wait(waitCtx, txHash)
	switch {
	case err != nil && ctx.Err() == nil && waitCtx.Err() != nil:
		// Not included yet: the scan records it when it is.
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("authorized payment: waiting for %s: %w", txHash, err)
	}
	// The treasury paid this transaction's gas, reverted or not; its hash
	// is kept in no table the gas tally reads (a payment's tx is usually
	// the payer's), so its cost is recorded now (best effort: a crash here
	// leaves it out of the gas ledger).
	s.recordRelayGas(ctx, t.mode, t.ledger, txHash)
	if rc.State == chains.TxFailed && !replayed {
		// The same authorization relayed twice: a retry whose first relay
		// was still pooled (its process died between broadcast and
		// answer, or its answer was lost) reverts once the first lands.
		// The first is the payment and the answer, never "failed" for a
		// payment that landed, and the revert is not the payer's.
		if prior, done, err := s.replayAuthorization(ctx, t, auth); err == nil && done {
			return prior, nil
		}
	}
	s.relayIncluded(ctx, t, auth, txHash, rc.State == chains.TxFailed)
	if rc.State == chains.TxFailed {
		out.Status = "failed"
		s.logger.WarnContext(ctx, "authorized payment reverted", "session", t.sess.ExternalID, "tx", txHash, "err", rc.Err)
		return out, nil
	}
	if err := s.recordAuthorizedPayment(ctx, t, txHash, auth.Value); err != nil {
		return nil, err
	}
	return s.authorizedPaymentOf(ctx, out)
}

// recordAuthorizedPayment records the deposit the included relay txHash
// made to the session's address, through the deposit scan's code path.
func (s *Service) recordAuthorizedPayment(ctx context.Context, t *authorizedTarget, txHash string, value *big.Int) error {
	reader, ok := t.ledger.(chains.DepositReader)
	if !ok {
		return nil // the scan records it
	}
	deps, err := reader.DepositsIn(ctx, txHash, t.payTo.Address)
	if err != nil {
		s.logger.WarnContext(ctx, "authorized payment: reading the deposit; left to the deposit scan", "tx", txHash, "err", err)
		return nil
	}
	var dep *chains.Deposit
	for i := range deps {
		if deps[i].Amount != nil && deps[i].Amount.Cmp(value) == 0 {
			dep = &deps[i]
			break
		}
	}
	if dep == nil {
		return nil
	}
	network := s.networks(t.mode)[t.chain]
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		d := &depositTx{s: s, tx: tx, sqlTx: sqlTx, mode: t.mode, chain: t.chain, decimals: t.ledger.Decimals(),
			addrs: map[string]string{s.wallets(t.chain).NormalizeAddress(dep.To): t.payTo.Address}}
		if err := d.apply(ctx, chains.DepositEvent{Kind: chains.DepositSeen, Deposit: *dep, Required: network.Confirmations}); err != nil {
			return fmt.Errorf("authorized payment: recording the payment of %s: %w", txHash, err)
		}
		return nil
	})
}

// authorizedPaymentOf fills out's payment as it stands.
func (s *Service) authorizedPaymentOf(ctx context.Context, out *AuthorizedPayment) (*AuthorizedPayment, error) {
	sess, err := s.cfg.DB.Ent.CheckoutSession.Get(ctx, out.Session.ID)
	if err != nil {
		return nil, fmt.Errorf("authorized payment: reading session: %w", err)
	}
	out.Session = sess
	p, err := s.cfg.DB.Ent.Payment.Query().Where(
		payment.SessionID(sess.ID), payment.Chain(string(out.Chain)), payment.TxHash(out.TxHash),
	).Order(ent.Desc(payment.FieldCreatedAt)).First(ctx)
	switch {
	case err == nil:
		out.Payment, out.Status, out.Confirmations = p, string(p.Status), p.Confirmations
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("authorized payment: reading payment: %w", err)
	default:
		out.Status = "pending"
	}
	return out, nil
}
