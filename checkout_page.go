package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/internal/store"
)

// The checkout page API (spec 4.4): what the hosted page reads, the
// customer's choice of chain and token (which issues the session's deposit
// address) and the payment status the page polls. None of it needs a key;
// a page that sends X-Checkout-Public-Key has it checked against the
// session's merchant and mode.

// PaymentOption is one chain and token the customer may pay with.
type PaymentOption struct {
	Chain chains.Name
	Token string
	// TokenAddress is the token's contract (EVM) or mint (Solana).
	TokenAddress string
	Decimals     int32
}

// DepositInstructions tell the customer where and how much to pay.
type DepositInstructions struct {
	Chain        chains.Name
	Token        string
	TokenAddress string
	Decimals     int32
	// ChainID is the EVM chain id; 0 on Solana.
	ChainID uint64
	Address string
	// AmountUSD is the session's amount; AmountToken the exact token amount
	// to send (1 USDC = 1 USD) and AmountUnits the same in base units.
	AmountUSD   decimal.Decimal
	AmountToken decimal.Decimal
	AmountUnits *big.Int
	// PaymentURI is an EIP-681 (EVM) or Solana Pay (solana) request; the QR
	// code encodes it.
	PaymentURI string
	ExpiresAt  time.Time
	Status     checkoutsession.Status
	// TokenDomain is the token's EIP-712 domain, with which a browser
	// wallet signs a TransferWithAuthorization of AmountUnits to Address
	// for the service to relay (the payer needs no gas); nil where that is
	// not offered (Solana, or a token whose domain the ledger could not
	// establish).
	TokenDomain *chains.TokenDomain
}

// CheckoutPage is what the hosted checkout page renders.
type CheckoutPage struct {
	Session  *ent.CheckoutSession
	Merchant *ent.Merchant
	Mode     Mode
	// Options are the merchant's accepted tokens on the chains configured
	// for the session's mode, in the API's chain order.
	Options []PaymentOption
	// SuccessURL and CancelURL: the session's, else the merchant's defaults.
	SuccessURL string
	CancelURL  string
	// Deposit is set once a chain is selected.
	Deposit *DepositInstructions
	// Open is whether the customer can still choose a chain and pay
	// (sessionOpen: pending or detecting, and expires_at not come).
	Open bool
	// Receipt is the confirmed payments once the session is confirmed.
	Receipt []ReceiptLine
}

// CheckoutStatus is the payment status the page polls (spec 2.7).
type CheckoutStatus struct {
	Status checkoutsession.Status
	// AmountPaid sums the session's payments that a reorg has not dropped
	// (seen, confirming or confirmed), in USD at 1 USDC = 1 USD.
	AmountPaid decimal.Decimal
	Chain      string
	Token      string
	// Confirmations is the fewest confirmations among those payments (the
	// session is confirmed when every one is), 0 without payments.
	Confirmations uint64
	// Required is the confirmations a deposit needs on the session's chain;
	// nil when it is not known (no chain selected, or the chain's ledger
	// does not say).
	Required *uint64
	// Amount is the session's amount in USD.
	Amount decimal.Decimal
	// Progress is what AmountPaid amounts to against Amount (ProgressOf):
	// the page's state, what is due, what was paid beyond.
	Progress PaymentProgress
}

func sessionMode(sess *ent.CheckoutSession) Mode { return sessionModeOf(sess.Livemode) }

// sessionForPage loads a session by its external id with its merchant, and
// checks the optional public key.
func (s *Service) sessionForPage(ctx context.Context, externalID, publicKey string) (*ent.CheckoutSession, error) {
	sess, err := s.sessionByExternalID(ctx, externalID)
	if err != nil {
		return nil, err
	}
	if err := s.checkPublicKey(ctx, publicKey, sess.MerchantID, sess.Livemode); err != nil {
		return nil, err
	}
	return sess, nil
}

func sessionNotFound(externalID string) error {
	return fmt.Errorf("%w: checkout session %q", ErrNotFound, externalID)
}

// checkPublicKey accepts an empty key (the page may send none); a key that is
// sent must be a current public key of the session's merchant in the
// session's mode, else ErrUnauthorized.
func (s *Service) checkPublicKey(ctx context.Context, publicKey string, merchantID uuid.UUID, livemode bool) error {
	if publicKey == "" {
		return nil
	}
	auth, err := s.MerchantByPublicKey(ctx, publicKey)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: unknown public key", ErrUnauthorized)
	}
	if err != nil {
		return err
	}
	if auth.Merchant.ID != merchantID || (auth.Mode == ModeLive) != livemode {
		return fmt.Errorf("%w: the public key does not belong to this session's merchant and mode", ErrUnauthorized)
	}
	return nil
}

// PaymentOptions lists what a merchant accepts (AcceptedTokens: its
// accepted_tokens, by default USDC on every chain) on the chains configured
// for mode, in the API's chain order.
func (s *Service) PaymentOptions(m *ent.Merchant, mode Mode) []PaymentOption {
	nets := s.networks(mode)
	var out []PaymentOption
	for _, c := range chains.All {
		n, ok := nets[c]
		if !ok || n.Ledger == nil || !merchantAccepts(m, c, TokenUSDC) {
			continue
		}
		out = append(out, PaymentOption{Chain: c, Token: TokenUSDC, TokenAddress: n.Ledger.Token(), Decimals: n.Ledger.Decimals()})
	}
	return out
}

// merchantAccepts reports whether the merchant accepts token on chain.
func merchantAccepts(m *ent.Merchant, chain chains.Name, token string) bool {
	for _, t := range AcceptedTokens(m) {
		if strings.EqualFold(strings.TrimSpace(t.Chain), string(chain)) && strings.EqualFold(strings.TrimSpace(t.Token), token) {
			return true
		}
	}
	return false
}

// CheckoutPage answers what the hosted page needs to render a session.
func (s *Service) CheckoutPage(ctx context.Context, externalID, publicKey string) (*CheckoutPage, error) {
	sess, err := s.sessionForPage(ctx, externalID, publicKey)
	if err != nil {
		return nil, err
	}
	m := sess.Edges.Merchant
	mode := sessionMode(sess)
	page := &CheckoutPage{
		Session:    sess,
		Merchant:   m,
		Mode:       mode,
		Options:    s.PaymentOptions(m, mode),
		SuccessURL: firstNonEmpty(sess.SuccessURL, m.SuccessURL),
		CancelURL:  firstNonEmpty(sess.CancelURL, m.CancelURL),
		Open:       sessionOpen(sess, s.now()),
	}
	if sess.Chain != "" {
		da, err := s.cfg.DB.Ent.DepositAddress.Query().
			Where(depositaddress.SessionID(sess.ID), depositaddress.Chain(sess.Chain)).
			Order(ent.Desc(depositaddress.FieldCreatedAt)).
			First(ctx)
		switch {
		case ent.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			// A chain no longer configured shows no instructions rather
			// than failing the page.
			if d, err := s.depositInstructions(ctx, sess, m, da); err == nil {
				page.Deposit = d
			}
		}
	}
	if sess.Status == checkoutsession.StatusConfirmed {
		if page.Receipt, err = s.receipt(ctx, sess); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// A payment request shows the merchant's name (label) and the session's
// description (message) in the payer's wallet, inside a QR code: a QR code
// holds at most 2,331 bytes, and a name or description long enough (200
// characters of emoji, 1,000 with spaces) would overflow it once
// percent-encoded. Each is cut to these many bytes of UTF-8 (at most three
// times as many once encoded), which keeps the whole request under about
// 750 bytes, a QR code a phone scans off a screen.
const (
	PaymentLabelMaxBytes   = 64
	PaymentMessageMaxBytes = 128
)

// paymentText is s cut to at most limit bytes on a character boundary, an
// ellipsis marking the cut (a wallet then shows that there is more).
func paymentText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], " ") + ellipsis
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// SelectPaymentMethod records the customer's choice of chain and token and
// answers the session's deposit address for it (spec 3.1: pending ->
// detecting). Refusals, each changing nothing:
//   - chain or token missing or not one the API knows, not accepted by the
//     merchant, or not configured for the session's mode: ValidationError
//     naming the field (422);
//   - the session is not pending or detecting, already has a payment, or has
//     passed expires_at: ErrConflict (409);
//   - the merchant is deactivated: ErrForbidden (403);
//   - the session was selected Config.SelectRateLimit times this minute:
//     a *RateLimitError (429).
//
// Selecting the chain already selected answers the same address again (a
// page reload does not burn an index); selecting another chain issues that
// chain's address, reusing the session's earlier address on that chain if it
// had one; the customer may switch even while an agent or a relay pays
// (mayTakeSession says why). Every address a session was given stays watched while the
// session is open and for the late-payment window after (checkout_deposits.go), so a
// payment to an old one is still found.
func (s *Service) SelectPaymentMethod(ctx context.Context, externalID, publicKey, chain, token string) (*DepositInstructions, error) {
	name, err := parseSelectChain(chain)
	if err != nil {
		return nil, err
	}
	if err := checkSelectToken(token); err != nil {
		return nil, err
	}
	sess, err := s.sessionForPage(ctx, externalID, publicKey)
	if err != nil {
		return nil, err
	}
	if err := s.allowSelect(ctx, sess.ID); err != nil {
		return nil, err
	}
	m := sess.Edges.Merchant
	if !m.Active {
		return nil, fmt.Errorf("%w: merchant is deactivated", ErrForbidden)
	}
	mode := sessionMode(sess)
	if !merchantAccepts(m, name, token) {
		return nil, Invalid("chain", "%s %s is not accepted by this merchant", name, token)
	}
	if _, err := s.ledger(mode, name); err != nil {
		return nil, err
	}
	// Fail fast outside the transaction; the same checks run again under
	// the session's lock.
	if err := selectable(sess, s.now(), nil); err != nil {
		return nil, err
	}
	// The chain's scan must start no later than now, before the address
	// exists, or a payment made before the chain's first scan is missed.
	if err := s.ensureCursor(ctx, mode, name); err != nil {
		return nil, err
	}

	var taken *takenSession
	err = retryIndexTaken(func() (err error) {
		taken, err = s.takeSession(ctx, sess.ID, sessionTake{payer: payerCustomer, chain: name, token: token, address: true})
		return err
	})
	if err != nil {
		return nil, err
	}
	da, updated := taken.address, taken.sess
	s.logger.InfoContext(ctx, "checkout payment method selected", "session", externalID, "chain", name,
		"address", da.Address, "family", da.ChainFamily, "index", da.DerivationIndex)
	return s.depositInstructions(ctx, updated, m, da)
}

func parseSelectChain(chain string) (chains.Name, error) {
	if strings.TrimSpace(chain) == "" {
		return "", Invalid("chain", "is required: one of base, arbitrum, ethereum, polygon, solana")
	}
	name := chains.Name(chain)
	if !name.Valid() {
		return "", Invalid("chain", "%q is not supported: expected one of base, arbitrum, ethereum, polygon, solana", chain)
	}
	return name, nil
}

func checkSelectToken(token string) error {
	if strings.TrimSpace(token) == "" {
		return Invalid("token", "is required: USDC")
	}
	if token != TokenUSDC {
		return Invalid("token", "%q is not supported: expected USDC", token)
	}
	return nil
}

// depositInstructions builds the answer for a session's deposit address.
func (s *Service) depositInstructions(ctx context.Context, sess *ent.CheckoutSession, m *ent.Merchant, da *ent.DepositAddress) (*DepositInstructions, error) {
	chain := chains.Name(da.Chain)
	ledger, err := s.ledger(sessionMode(sess), chain)
	if err != nil {
		return nil, err
	}
	decimals := ledger.Decimals()
	// 1 USDC = 1 USD: the token amount is the USD amount, exact.
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, decimals)
	if err != nil {
		return nil, err
	}
	d := &DepositInstructions{
		Chain:        chain,
		Token:        firstNonEmpty(sess.Token, TokenUSDC),
		TokenAddress: ledger.Token(),
		Decimals:     decimals,
		Address:      da.Address,
		AmountUSD:    sess.AmountUsd,
		AmountToken:  FromBaseUnits(units, decimals),
		AmountUnits:  units,
		ExpiresAt:    sess.ExpiresAt,
		Status:       sess.Status,
	}
	if chain.IsEVM() {
		id, ok := ledger.(interface{ ChainID() uint64 })
		if !ok {
			return nil, fmt.Errorf("ledger of %s does not report its chain id", chain)
		}
		d.ChainID = id.ChainID()
		if r, ok := ledger.(chains.AuthorizationRelayer); ok {
			// A ledger that relays payer-signed authorizations
			// (PayWithAuthorization): without the domain the page offers
			// the link and QR code only.
			if dom, err := r.TokenDomain(ctx); err == nil {
				d.TokenDomain = &dom
			} else {
				s.logger.WarnContext(ctx, "checkout: no EIP-712 domain for browser wallet payments", "chain", chain, "err", err)
			}
		}
	}
	d.PaymentURI = s.wallets(chain).PaymentURI(chains.PaymentRequest{
		ChainID: d.ChainID, Token: d.TokenAddress, Decimals: decimals, To: d.Address, Amount: units,
		Label: paymentText(m.Name, PaymentLabelMaxBytes), Message: paymentText(sess.Description, PaymentMessageMaxBytes),
	})
	return d, nil
}

// checkoutStatusQuery reads a session's status with its payments in one
// statement: the session by its unique external_id, its payments by the
// payments(session_id) index. One row per payment, or one row with NULL
// payment columns. Only what the answer needs: livemode and merchant_id
// check a public key.
const checkoutStatusQuery = `SELECT s.status, s.chain, s.token, s.livemode, s.merchant_id, s.amount_usd,
	p.amount_token, p.confirmations, p.status
FROM checkout_sessions s LEFT JOIN payments p ON p.session_id = s.id
WHERE s.external_id = `

// checkoutStatusBatchQuery is checkoutStatusQuery for many sessions at once
// (PostgreSQL), each row led by its session's external_id.
const checkoutStatusBatchQuery = `SELECT s.external_id, s.status, s.chain, s.token, s.livemode, s.merchant_id, s.amount_usd,
	p.amount_token, p.confirmations, p.status
FROM checkout_sessions s LEFT JOIN payments p ON p.session_id = s.id
WHERE s.external_id = ANY($1::text[])`

// checkoutStatusReads reads concurrent polls' statuses together on
// PostgreSQL (store.Batched), by session external_id: every poll that
// arrives during a read joins the next one. At most 256 sessions a
// statement, one statement at a time per pool (a read never waits on a
// lock, so a poll waits at most two reads); two at a time halved the
// batches and measured lower (BenchmarkCheckoutStatus). The statement runs
// on a connection of its own under the generic plan: planned per execution
// it cost more than it ran (BenchmarkCheckoutStatus: 43-50% of the bare
// handler with a plan per execution, 58-60% with the generic plan).
var checkoutStatusReads = store.NewBatched(store.BatchSpec[string, string, *statusAcc]{
	SQL:  checkoutStatusBatchQuery,
	Args: func(ids []string) []any { return []any{pq.StringArray(ids)} },
	Scan: func(rows *sql.Rows, found map[string]*statusAcc) error {
		var (
			id string
			r  statusRow
		)
		if err := rows.Scan(&id, &r.status, &r.chain, &r.token, &r.livemode, &r.merchantID, &r.amountUSD, &r.amount, &r.confs, &r.pStatus); err != nil {
			return err
		}
		acc := found[id]
		if acc == nil {
			acc = new(statusAcc)
			found[id] = acc
		}
		acc.add(&r)
		return nil
	},
	Key:         func(id string) string { return id },
	Max:         256,
	Timeout:     10 * time.Second,
	GenericPlan: true,
})

// CheckoutStatus answers the payment status the checkout page polls (every
// 3 seconds, by every open page): one indexed query, plus the public key
// lookup when the page sends one; from memory while the process caches
// statuses (checkout_status_cache.go: a change committed by any process drops the
// session as its notification arrives).
//
// On PostgreSQL, concurrent requests share round trips (see
// checkoutStatusReads): polls that arrive while earlier ones are being read are
// read together by the next statement, so under load the database serves a
// fraction of the statements it otherwise would.
func (s *Service) CheckoutStatus(ctx context.Context, externalID, publicKey string) (*CheckoutStatus, error) {
	acc, err := s.statusOf(ctx, externalID)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, sessionNotFound(externalID)
	}
	if err := s.checkPublicKey(ctx, publicKey, acc.merchantID, acc.livemode); err != nil {
		return nil, err
	}
	acc.fold()
	st := acc.st
	if st.Chain != "" {
		if n, ok := s.networks(sessionModeOf(acc.livemode))[chains.Name(st.Chain)]; ok {
			if n.Confirmations > 0 {
				req := n.Confirmations
				st.Required = &req
			}
		}
	}
	return &st, nil
}

// readStatusAcc reads one session's status rows from the database (with
// concurrent polls on PostgreSQL); nil when there is no such session.
func (s *Service) readStatusAcc(ctx context.Context, externalID string) (*statusAcc, error) {
	if s.cfg.DB.IsPostgres() {
		return checkoutStatusReads.Do(ctx, s.cfg.DB, externalID)
	}
	return s.readStatus(ctx, externalID)
}

// readStatus reads one session's status rows; nil when there is no such
// session.
func (s *Service) readStatus(ctx context.Context, externalID string) (*statusAcc, error) {
	placeholder := "?"
	if s.cfg.DB.IsPostgres() {
		placeholder = "$1"
	}
	rows, err := s.cfg.DB.QueryCached(ctx, checkoutStatusQuery+placeholder, externalID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var acc *statusAcc
	for rows.Next() {
		var r statusRow
		if err := rows.Scan(&r.status, &r.chain, &r.token, &r.livemode, &r.merchantID, &r.amountUSD, &r.amount, &r.confs, &r.pStatus); err != nil {
			return nil, err
		}
		if acc == nil {
			acc = new(statusAcc)
		}
		acc.add(&r)
	}
	return acc, rows.Err()
}

// statusRow is one row of the status queries.
type statusRow struct {
	status, chain, token, pStatus sql.NullString
	livemode                      bool
	merchantID                    uuid.UUID
	amountUSD                     decimal.Decimal
	amount, confs                 sql.NullInt64
}

// statusAcc folds a session's status rows.
type statusAcc struct {
	st          CheckoutStatus
	livemode    bool
	merchantID  uuid.UUID
	paid        big.Int // base units of the payments a reorg has not dropped
	hasPayments bool
	minConf     uint64
	folded      bool // st holds the amount paid and confirmations
}

// fold sets the amount paid and the confirmations of st from the rows
// added; once.
func (a *statusAcc) fold() {
	if a.folded {
		return
	}
	a.folded = true
	a.st.AmountPaid = FromBaseUnits(&a.paid, USDCDecimals)
	if a.hasPayments {
		a.st.Confirmations = a.minConf
	}
	a.st.Progress = ProgressOf(a.st.Status, a.st.Amount, a.st.AmountPaid)
}

func (a *statusAcc) add(r *statusRow) {
	a.st.Status, a.st.Chain, a.st.Token = checkoutsession.Status(r.status.String), r.chain.String, r.token.String
	a.livemode, a.merchantID, a.st.Amount = r.livemode, r.merchantID, r.amountUSD
	if !r.pStatus.Valid || r.pStatus.String == string(payment.StatusFailed) {
		return
	}
	a.paid.Add(&a.paid, big.NewInt(r.amount.Int64))
	c := uint64(max(r.confs.Int64, 0))
	if !a.hasPayments || c < a.minConf {
		a.minConf = c
	}
	a.hasPayments = true
}

func sessionModeOf(livemode bool) Mode {
	if livemode {
		return ModeLive
	}
	return ModeTest
}
