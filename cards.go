package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqljson"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/cardissuer"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/pairing"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
	"agentpay/internal/idempotency"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Card purchases (spec 4.2, design.md 6, docs/identity-and-cards.md): an
// agent asks its paired, identity-verified human to approve a purchase;
// on approval the amount is reserved and a single-use virtual card bound
// to it is issued; the agent reads the card once and the merchant charges
// it; what the charge leaves, or a card that expires unused, returns.
//
//	pending_approval -> approved -> used | expired_unused
//	pending_approval -> denied | expired
//	approved -> failed   (the reservation did not go through: nothing moved)
//
// Who moves it: the agent makes the request; the human approves or denies
// (ApproveCardRequest, DenyCardRequest); the card network's authorization
// moves an approved request to used (AuthorizeCardCharge); the worker's
// cards job (CardsTick) moves the ones whose time ran out and finishes
// what a crash left (issuing, returning money). Every move is a
// conditional update from the state it leaves, so of two racing moves
// (approve and expire, two approvals, two charges) exactly one happens.
//
// The money: approval records, in the transaction that moves the request
// to approved, a transfer of the whole amount (no fee) from the agent's
// wallet to the treasury, gasless as sends are (transfers.go), under the
// wallet lock and the no-overdraft rule; the card is issued once it is
// included. The return (amount - charged, or all of it) goes from the
// treasury to the wallet the reservation left, with a fixed ref per
// request (the EIP-3009 nonce on Base, looked up before any resend on
// Solana), so it is paid once however often the job runs.

// DefaultCardRequestTTL is how long a request waits for the human
// (CARD_REQUEST_TTL).
const DefaultCardRequestTTL = 30 * time.Minute

// MaxCardLifetime is the longest an issued card works.
const MaxCardLifetime = 24 * time.Hour

// MinCardPurchaseUSD is the smallest card purchase.
var MinCardPurchaseUSD = decimal.New(50, -2)

// Bounds of a request's text (characters).
const (
	CardMerchantMaxLen    = 200
	CardDescriptionMaxLen = 1000
)

// Card request statuses.
const (
	CardPendingApproval = "pending_approval"
	CardApproved        = "approved"
	CardDenied          = "denied"
	CardExpired         = "expired"
	CardFailed          = "failed"
	CardUsed            = "used"
	CardExpiredUnused   = "expired_unused"
)

// Account event kinds of card purchases: to the agent and, as a line of
// their history, to the human.
const (
	EventCardRequested = "card.requested" // to the human
	EventCardApproved  = "card.approved"
	EventCardDenied    = "card.denied"
	EventCardExpired   = "card.expired" // the request lapsed undecided
	EventCardFailed    = "card.failed"
	EventCardIssued    = "card.issued"
	EventCardCharged   = "card.charged"
	// EventCardExpiredUnused: the card expired with no charge.
	EventCardExpiredUnused = "card.expired_unused"
	// EventCardReturned: the unspent amount reached the agent's wallet.
	EventCardReturned = "card.returned"
)

// ctokFormat is the shape of card tokens: ctok_ and 32 base62 characters.
var ctokFormat = vault.IDFormat{Prefix: "ctok_", Alphabet: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", Length: 32}

// ErrCardsOff: no card issuer is configured.
var ErrCardsOff = fmt.Errorf("%w: card purchases are not configured on this service", ErrUnavailable)

func (s *Service) cardRequestTTL() time.Duration {
	if s.cfg.CardRequestTTL > 0 {
		return s.cfg.CardRequestTTL
	}
	return DefaultCardRequestTTL
}

func (s *Service) cardLifetime() time.Duration {
	if s.cfg.CardLifetime > 0 && s.cfg.CardLifetime < MaxCardLifetime {
		return s.cfg.CardLifetime
	}
	return MaxCardLifetime
}

// CardsOn reports whether card purchases are configured.
func (s *Service) CardsOn() bool { return s.cfg.CardIssuer != nil }

// CardPurchaseRequest is an agent's request-purchase.
type CardPurchaseRequest struct {
	AmountUSD    decimal.Decimal
	MerchantName string
	Description  string
	// UserID picks the human when several qualify ("" when one does).
	UserID string
	// IdempotencyKey makes the request safe to retry: the card request
	// carries it (a key column on the created resource,
	// internal/idempotency); nil for none.
	IdempotencyKey *string
}

// CardDetails are an issued card's secrets, answered once.
type CardDetails struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	CVC      string `json:"cvc"`
}

// CardRequestView is a request as the agent or the human reads it.
type CardRequestView struct {
	Request       *ent.CardRequest
	AgentUsername string
	Username      string
	// Deciders and ApprovedBy name the humans whose approval it needs and
	// those of them who approved.
	Deciders, ApprovedBy []string
	// Details are the card's number, expiry and CVC, set only on the read
	// that reveals them (the first after issue).
	Details *CardDetails
}

// Status is the request's status.
func (v *CardRequestView) Status() string { return string(v.Request.Status) }

// AwaitsDecisionOf reports whether the request waits for u's approval: u
// is one of its deciders, has not approved it, and it is still pending.
func (v *CardRequestView) AwaitsDecisionOf(u uuid.UUID) bool {
	r := v.Request
	return r.Status == cardrequest.StatusPendingApproval && slices.Contains(cardDeciders(r), u) && !slices.Contains(r.ApprovedBy, u)
}

// Amount is the approved maximum.
func (v *CardRequestView) Amount() decimal.Decimal { return USDCAmount(v.Request.Amount) }

// validateCardPurchase checks the request's own fields and answers the
// amount in base units and the trimmed texts.
func validateCardPurchase(req *CardPurchaseRequest) (int64, error) {
	u, err := ToBaseUnits("amount_usd", req.AmountUSD, USDCDecimals)
	if err != nil {
		return 0, err
	}
	if !req.AmountUSD.Equal(req.AmountUSD.Truncate(2)) {
		return 0, Invalid("amount_usd", "must be in whole cents (at most 2 decimals)")
	}
	if req.AmountUSD.LessThan(MinCardPurchaseUSD) {
		return 0, Invalid("amount_usd", "must be at least %s", MinCardPurchaseUSD.StringFixed(2))
	}
	if !u.IsInt64() {
		return 0, Invalid("amount_usd", "is too large")
	}
	req.MerchantName = strings.TrimSpace(req.MerchantName)
	req.Description = strings.TrimSpace(req.Description)
	switch {
	case req.MerchantName == "":
		return 0, Invalid("merchant_name", "is required")
	case utf8.RuneCountInString(req.MerchantName) > CardMerchantMaxLen || !utf8.ValidString(req.MerchantName):
		return 0, Invalid("merchant_name", "must be at most %d characters", CardMerchantMaxLen)
	case utf8.RuneCountInString(req.Description) > CardDescriptionMaxLen || !utf8.ValidString(req.Description):
		return 0, Invalid("description", "must be at most %d characters", CardDescriptionMaxLen)
	}
	return u.Int64(), nil
}

// cardFingerprinted is a request's canonical form for its Idempotency-Key.
type cardFingerprinted struct {
	AmountUSD    string `json:"amount_usd"`
	MerchantName string `json:"merchant_name"`
	Description  string `json:"description"`
	UserID       string `json:"user_id"`
}

const cardPurchaseOperation = "card_request_purchase"

// RequestCardPurchase asks the agent's paired human to approve a card
// purchase, its one entry point. With req.IdempotencyKey the same request
// answers the first again (replayed); another request with the key is
// ErrIdempotencyKeyReused.
//
// Refusals (each changes nothing): no card issuer (ErrCardsOff); bad
// amount, merchant or description, user_id not a uuid, several qualifying
// humans and no user_id (ValidationError); no approved pairing, no paired
// human with verified identity, the named human not paired or not
// verified, over the tier's per-send limit (ErrForbidden, saying what is
// missing); the available balance short on every chain
// (ErrInsufficientFunds).
func (s *Service) RequestCardPurchase(ctx context.Context, a *ent.Agent, req CardPurchaseRequest) (view *CardRequestView, replayed bool, err error) {
	key := req.IdempotencyKey
	if !s.CardsOn() {
		return nil, false, ErrCardsOff
	}
	units, err := validateCardPurchase(&req)
	if err != nil {
		return nil, false, err
	}
	var idemKey string
	var fingerprint []byte
	if key != nil {
		if idemKey, err = ParseIdempotencyKey(*key); err != nil {
			return nil, false, err
		}
		fingerprint = idempotency.Fingerprint(cardPurchaseOperation, cardFingerprinted{
			AmountUSD: req.AmountUSD.String(), MerchantName: req.MerchantName, Description: req.Description, UserID: strings.TrimSpace(req.UserID),
		})
		if prior, err := s.cardRequestByKey(ctx, a, idemKey, fingerprint); prior != nil || err != nil {
			return prior, prior != nil, err
		}
	}
	u, err := s.cardHuman(ctx, a, strings.TrimSpace(req.UserID))
	if err != nil {
		return nil, false, err
	}
	limits := LimitsFor(string(a.Tier))
	if req.AmountUSD.GreaterThan(limits.PerSend) {
		return nil, false, fmt.Errorf("%w: %s USD exceeds the per-send limit of %s USD of tier %s",
			ErrForbidden, req.AmountUSD, limits.PerSend, a.Tier)
	}
	// The spending policies: a cap, or deny by default, refuses; a
	// threshold or an allow-list that holds it makes its human a decider
	// beside the human asked (each must approve).
	policy, err := s.decideSpend(ctx, a, cardSpend(units, req.MerchantName), false)
	if err != nil {
		return nil, false, err
	}
	if policy.Outcome == SpendRefused {
		return nil, false, policy.Err()
	}
	deciders := []uuid.UUID{u.ID}
	for _, id := range policy.HeldBy {
		deciders, _ = addVoter(deciders, id)
	}
	plan, err := s.planSend(ctx, s.cfg.DB.Ent, s.cardReservation(a, units, req.AmountUSD))
	if err != nil {
		return nil, false, err
	}
	if plan.chosen == nil {
		return nil, false, plan.refusal(req.AmountUSD)
	}

	now := s.now().UTC().Truncate(time.Microsecond)
	var r *ent.CardRequest
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		c := tx.CardRequest.Create().
			SetAgentID(a.ID).
			SetUserID(u.ID).
			SetAmount(units).
			SetMerchantName(req.MerchantName).
			SetDescription(req.Description).
			SetIssuer(s.cfg.CardIssuer.Name()).
			SetDeciders(deciders).
			SetExpiresAt(now.Add(s.cardRequestTTL())).
			SetCreatedAt(now).
			SetUpdatedAt(now)
		if key != nil {
			c.SetIdempotencyKey(idemKey).SetFingerprint(fingerprint)
		}
		if r, err = c.Save(ctx); err != nil {
			return err
		}
		// Every decider is told and mailed: the human asked, and each
		// whose policy held it.
		holders, err := tx.User.Query().Where(user.IDIn(deciders...)).All(ctx)
		if err != nil {
			return err
		}
		for _, h := range holders {
			if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(h.ID), EventCardRequested, cardEventDataOf(r, a.Username, "")); err != nil {
				return err
			}
			if _, err := s.queueMail(ctx, tx, sqlTx, s.cardRequestMail(h, a, r)); err != nil {
				return err
			}
		}
		return nil
	})
	if key != nil && ent.IsConstraintError(err) {
		// The same key, concurrently: the first request's row answers.
		prior, perr := s.cardRequestByKey(ctx, a, idemKey, fingerprint)
		if perr != nil || prior != nil {
			return prior, prior != nil, perr
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("recording card request: %w", err)
	}
	view, err = s.cardView(ctx, r)
	return view, false, err
}

// cardRequestByKey answers the agent's request made with key, nil when
// there is none; another request's fingerprint is ErrIdempotencyKeyReused.
func (s *Service) cardRequestByKey(ctx context.Context, a *ent.Agent, key string, fingerprint []byte) (*CardRequestView, error) {
	r, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.AgentID(a.ID), cardrequest.IdempotencyKey(key)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	if string(r.Fingerprint) != string(fingerprint) {
		return nil, fmt.Errorf("%w: this Idempotency-Key was used for another card request", ErrIdempotencyKeyReused)
	}
	return s.cardView(ctx, r)
}

// cardHuman is the human a request goes to: the one named, or the one
// paired human with verified identity.
func (s *Service) cardHuman(ctx context.Context, a *ent.Agent, userID string) (*ent.User, error) {
	ps, err := s.cfg.DB.Ent.Pairing.Query().
		Where(pairing.AgentID(a.ID), pairing.StatusEQ(pairing.StatusApproved)).
		WithUser().All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairings: %w", err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%w: card purchases need a paired human: this agent has no approved pairing (%s)", ErrForbidden, ActionRequestPairing.Mark())
	}
	if userID != "" {
		id, err := uuid.Parse(userID)
		if err != nil {
			return nil, Invalid("user_id", "is not a user id")
		}
		for _, p := range ps {
			if p.UserID == id {
				if p.Edges.User.IdentityStatus != user.IdentityStatusVerified {
					return nil, fmt.Errorf("%w: the paired human %s has not completed identity verification", ErrForbidden, p.Edges.User.Username)
				}
				return p.Edges.User, nil
			}
		}
		return nil, fmt.Errorf("%w: this agent has no approved pairing with user %s", ErrForbidden, id)
	}
	var verified []*ent.User
	for _, p := range ps {
		if p.Edges.User.IdentityStatus == user.IdentityStatusVerified {
			verified = append(verified, p.Edges.User)
		}
	}
	switch len(verified) {
	case 0:
		return nil, fmt.Errorf("%w: card purchases need a paired human who completed identity verification; no paired human has", ErrForbidden)
	case 1:
		return verified[0], nil
	}
	return nil, Invalid("user_id", "is required: %d paired humans could approve this; name one", len(verified))
}

// cardReservation is the transfer that reserves a card's amount: the
// agent's wallet to the treasury, on the first chain that covers it.
func (s *Service) cardReservation(a *ent.Agent, units int64, amount decimal.Decimal) *outgoing {
	treasury := map[chains.Name]string{}
	for _, c := range sendChainOrder {
		if addr := s.cfg.Treasury.Address(c); addr != "" {
			treasury[c] = addr
		}
	}
	return &outgoing{kind: transfer.KindCardReservation, from: agentHolder(a), external: treasury, candidates: sendChainOrder, units: units, amount: amount}
}

func (s *Service) cardRequestMail(u *ent.User, a *ent.Agent, r *ent.CardRequest) Mail {
	link := s.appURL("/#cards")
	amount := usd(USDCAmount(r.Amount))
	text := fmt.Sprintf("The agent %s asks you to approve a card purchase of %s USD at %s.\n", a.Username, amount, r.MerchantName)
	if r.Description != "" {
		text += fmt.Sprintf("\nWhat for: %s\n", r.Description)
	}
	text += fmt.Sprintf("\nApprove or deny it within %s: %s\n\nIf you do nothing, it expires and nothing is spent.\n", s.cardRequestTTL(), link)
	return Mail{
		To:      u.Email,
		Subject: fmt.Sprintf("%s asks to buy at %s for %s USD", a.Username, r.MerchantName, amount),
		Text:    text,
		HTML: fmt.Sprintf(`<p>The agent <b>%s</b> asks you to approve a card purchase of <b>%s USD</b> at <b>%s</b>.</p>%s<p><a href="%s">Approve or deny it</a> within %s.</p><p>If you do nothing, it expires and nothing is spent.</p>`,
			html.EscapeString(a.Username), amount, html.EscapeString(r.MerchantName), quoteHTML(r.Description), html.EscapeString(link), s.cardRequestTTL()),
	}
}

// cardEventData is the data of every card.* event: never the card's
// number or CVC.
type cardEventData struct {
	RequestID     uuid.UUID   `json:"request_id"`
	Status        string      `json:"status"`
	AgentUsername string      `json:"agent_username,omitempty"`
	AmountUSD     json.Number `json:"amount_usd"`
	MerchantName  string      `json:"merchant_name"`
	Description   string      `json:"description,omitempty"`
	CardToken     string      `json:"card_token,omitempty"`
	Last4         string      `json:"last4,omitempty"`
	ChargedUSD    json.Number `json:"charged_usd,omitempty"`
	ReturnedUSD   json.Number `json:"returned_usd,omitempty"`
	TxHash        string      `json:"tx_hash,omitempty"`
	ExpiresAt     *time.Time  `json:"expires_at,omitempty"`
	Message       string      `json:"message,omitempty"`
}

func cardEventDataOf(r *ent.CardRequest, agentUsername, message string) cardEventData {
	d := cardEventData{
		RequestID: r.ID, Status: string(r.Status), AgentUsername: agentUsername,
		AmountUSD: json.Number(USDCAmount(r.Amount).String()), MerchantName: r.MerchantName, Description: r.Description,
		Last4: r.CardLast4, Message: message,
	}
	if r.Status == cardrequest.StatusPendingApproval {
		d.ExpiresAt = &r.ExpiresAt
	} else if r.CardExpiresAt != nil {
		d.ExpiresAt = r.CardExpiresAt
	}
	if r.CardToken != nil {
		d.CardToken = *r.CardToken
	}
	if r.ChargedAmount != nil {
		d.ChargedUSD = json.Number(USDCAmount(*r.ChargedAmount).String())
	}
	return d
}

// recordCardEvents tells the agent and every decider of a move.
func (s *Service) recordCardEvents(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.CardRequest, kind string, data cardEventData) error {
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(r.AgentID), kind, data); err != nil {
		return err
	}
	for _, id := range cardDeciders(r) {
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(id), kind, data); err != nil {
			return err
		}
	}
	return nil
}

// cardDeciders are the humans whose approval the request needs: the human
// asked and each whose policy held it, as kept; the human asked alone for
// a request made before they were kept.
func cardDeciders(r *ent.CardRequest) []uuid.UUID {
	if len(r.Deciders) == 0 {
		return []uuid.UUID{r.UserID}
	}
	return r.Deciders
}

// cardView reads a request's parties' names.
func (s *Service) cardView(ctx context.Context, r *ent.CardRequest) (*CardRequestView, error) {
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("card request %s: agent: %w", r.ID, err)
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, r.UserID)
	if err != nil {
		return nil, fmt.Errorf("card request %s: user: %w", r.ID, err)
	}
	v := &CardRequestView{Request: r, AgentUsername: a.Username, Username: u.Username}
	if v.Deciders, err = s.UsernamesOf(ctx, cardDeciders(r)); err != nil {
		return nil, err
	}
	if v.ApprovedBy, err = s.UsernamesOf(ctx, r.ApprovedBy); err != nil {
		return nil, err
	}
	return v, nil
}

// MaxCardRequestsListed is the most requests a list answers.
const MaxCardRequestsListed = 200

// AgentCardRequests lists the agent's requests, newest first.
func (s *Service) AgentCardRequests(ctx context.Context, a *ent.Agent) ([]*CardRequestView, error) {
	return s.listCardRequests(ctx, s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.AgentID(a.ID)))
}

// UserCardRequests lists the requests the user decides (made to them, or
// held by their spending policy), newest first.
func (s *Service) UserCardRequests(ctx context.Context, u *ent.User) ([]*CardRequestView, error) {
	return s.listCardRequests(ctx, s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.Or(
		cardrequest.UserID(u.ID),
		func(sel *entsql.Selector) {
			sel.Where(sqljson.ValueContains(sel.C(cardrequest.FieldDeciders), u.ID.String()))
		},
	)))
}

func (s *Service) listCardRequests(ctx context.Context, q *ent.CardRequestQuery) ([]*CardRequestView, error) {
	rs, err := q.WithAgent().WithUser().
		Order(ent.Desc(cardrequest.FieldCreatedAt), ent.Desc(cardrequest.FieldID)).
		Limit(MaxCardRequestsListed).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading card requests: %w", err)
	}
	// The deciders' names, read once for the page.
	var ids []uuid.UUID
	for _, r := range rs {
		ids = append(ids, cardDeciders(r)...)
	}
	names := map[uuid.UUID]string{}
	if len(ids) > 0 {
		us, err := s.cfg.DB.Ent.User.Query().Where(user.IDIn(ids...)).Select(user.FieldID, user.FieldUsername).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading deciders: %w", err)
		}
		for _, u := range us {
			names[u.ID] = u.Username
		}
	}
	nameAll := func(ids []uuid.UUID) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			if n, ok := names[id]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	out := make([]*CardRequestView, len(rs))
	for i, r := range rs {
		out[i] = &CardRequestView{Request: r, AgentUsername: r.Edges.Agent.Username, Username: r.Edges.User.Username,
			Deciders: nameAll(cardDeciders(r)), ApprovedBy: nameAll(r.ApprovedBy)}
	}
	return out, nil
}

func parseCardRequestID(id string) (uuid.UUID, error) {
	rid, err := uuid.Parse(id)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: no card request %q", ErrNotFound, id)
	}
	return rid, nil
}

// AgentCardRequest is one of the agent's requests. The first read after
// the card is issued answers its details (Details) and marks them shown;
// every later read answers the last four digits only.
func (s *Service) AgentCardRequest(ctx context.Context, a *ent.Agent, id string) (*CardRequestView, error) {
	rid, err := parseCardRequestID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.cfg.DB.Ent.CardRequest.Query().Where(cardrequest.ID(rid), cardrequest.AgentID(a.ID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no card request %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	view, err := s.cardView(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.Status != cardrequest.StatusApproved || r.CardSealed == nil || r.CardRevealedAt != nil {
		return view, nil
	}
	// Shown once: only the read whose update takes the unrevealed row
	// answers the details, however many race.
	now := s.now().UTC().Truncate(time.Microsecond)
	n, err := s.cfg.DB.Ent.CardRequest.Update().
		Where(cardrequest.ID(r.ID), cardrequest.CardRevealedAtIsNil(), cardrequest.CardSealedNotNil()).
		SetCardRevealedAt(now).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("revealing card: %w", err)
	}
	if n == 0 {
		return view, nil
	}
	plain, err := s.cfg.Vault.Open(*r.CardSealed, cardSealAD(r.ID))
	if err != nil {
		return nil, fmt.Errorf("card request %s: opening card: %w", r.ID, err)
	}
	defer clear(plain)
	var d CardDetails
	if err := json.Unmarshal(plain, &d); err != nil {
		return nil, fmt.Errorf("card request %s: reading card: %w", r.ID, err)
	}
	view.Request.CardRevealedAt = &now
	view.Details = &d
	return view, nil
}

func cardSealAD(id uuid.UUID) []byte { return []byte("agentpay/card/" + id.String()) }

// userCardRequest reads a request the user decides. One of an agent the
// user is paired with but held by others is ErrForbidden; any other, or
// an unknown id, ErrNotFound.
func (s *Service) userCardRequest(ctx context.Context, u *ent.User, id string) (*ent.CardRequest, error) {
	rid, err := parseCardRequestID(id)
	if err != nil {
		return nil, err
	}
	notFound := fmt.Errorf("%w: no card request %s", ErrNotFound, id)
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, rid)
	if ent.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	if slices.Contains(cardDeciders(r), u.ID) {
		return r, nil
	}
	paired, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.AgentID(r.AgentID), pairing.UserID(u.ID),
		pairing.StatusEQ(pairing.StatusApproved)).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairing: %w", err)
	}
	if !paired {
		return nil, notFound
	}
	if err := s.requireDecider(ctx, cardDeciders(r), u); err != nil {
		return nil, err
	}
	return r, nil
}

// cardApprovalTarget is the step-up target of approving a card request:
// one the user decides, still pending.
func (s *Service) cardApprovalTarget(ctx context.Context, u *ent.User, id string) (stepUpTarget, error) {
	r, err := s.userCardRequest(ctx, u, id)
	if err != nil {
		return stepUpTarget{}, err
	}
	if now := s.now(); r.Status != cardrequest.StatusPendingApproval || !now.Before(r.ExpiresAt) {
		return stepUpTarget{}, errCardNotPending(r, now)
	}
	name, _, err := s.AgentNameAndTier(ctx, r.AgentID)
	if err != nil {
		return stepUpTarget{}, err
	}
	return stepUpTarget{action: StepUpApproveCard, subject: r.ID.String(),
		summary: fmt.Sprintf("approve %s's card purchase of %s USD at %s", name, usd(USDCAmount(r.Amount)), r.MerchantName)}, nil
}

// castCardApproval records u's yes on the request under its row's lock,
// and answers it as it is then and whether it is complete: every decider
// still paired said yes, the human asked (who must stay paired) among
// them.
func (s *Service) castCardApproval(ctx context.Context, id uuid.UUID, u *ent.User) (*ent.CardRequest, bool, error) {
	var (
		r        *ent.CardRequest
		complete bool
	)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		cur, err := store.ForUpdate(s.cfg.DB, tx.CardRequest.Query().Where(cardrequest.ID(id))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading card request: %w", err)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if cur.Status != cardrequest.StatusPendingApproval || !now.Before(cur.ExpiresAt) {
			return errCardNotPending(cur, now)
		}
		var changed bool
		cur.ApprovedBy, changed = addVoter(cur.ApprovedBy, u.ID)
		asked, err := tx.Pairing.Query().Where(pairing.AgentID(cur.AgentID), pairing.UserID(cur.UserID),
			pairing.StatusEQ(pairing.StatusApproved)).Exist(ctx)
		if err != nil {
			return fmt.Errorf("reading pairing: %w", err)
		}
		if complete, err = s.allDecidersApproved(ctx, tx.Client(), cur.AgentID, cardDeciders(cur), cur.ApprovedBy); err != nil {
			return err
		}
		complete = complete && asked && slices.Contains(cur.ApprovedBy, cur.UserID)
		if changed {
			if err := tx.CardRequest.UpdateOneID(cur.ID).SetApprovedBy(cur.ApprovedBy).Exec(ctx); err != nil {
				return fmt.Errorf("recording approval: %w", err)
			}
		}
		r = cur
		return nil
	})
	return r, complete, err
}

// errCardNotPending: the request was decided, or lapsed, before this move.
func errCardNotPending(r *ent.CardRequest, now time.Time) error {
	if r.Status == cardrequest.StatusPendingApproval && !now.Before(r.ExpiresAt) {
		return fmt.Errorf("%w: this card request expired", ErrConflict)
	}
	return fmt.Errorf("%w: this card request is %s, no longer pending approval", ErrConflict, r.Status)
}

// DenyCardRequest is the human's no.
func (s *Service) DenyCardRequest(ctx context.Context, v *Viewer, id string) (*CardRequestView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	r, err := s.userCardRequest(ctx, v.User, id)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtGT(now)).
			SetStatus(cardrequest.StatusDenied).SetDecidedAt(now).Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return errCardNotPending(r, now)
		}
		r.Status, r.DecidedAt = cardrequest.StatusDenied, &now
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardDenied, cardEventDataOf(r, "", "The human denied the purchase; nothing was reserved."))
	})
	if err != nil {
		return nil, err
	}
	return s.cardView(ctx, r)
}

// ApproveCardRequest is a decider's yes. When the human has passkeys it
// needs a fresh assertion begun for this request: ceremonyID, the
// step-up's id from BeginCardApproval or BeginStepUp, and the browser's
// answer. Until every decider still paired has said yes (the human asked
// among them) it only records this one's; the last yes reserves the
// amount (the transfer is recorded in the transaction that moves the
// request to approved, so of an approval racing another or the expiry
// exactly one reserves), waits for the transfer (at most wait; 0 is
// DefaultSendWait) and issues the card.
func (s *Service) ApproveCardRequest(ctx context.Context, v *Viewer, id, ceremonyID string, assertion []byte, wait time.Duration) (*CardRequestView, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	if !s.CardsOn() {
		return nil, ErrCardsOff
	}
	u := v.User
	target, err := s.cardApprovalTarget(ctx, u, id)
	if err != nil {
		return nil, err
	}
	if err := s.proveApproval(ctx, u, target, ceremonyID, assertion); err != nil {
		return nil, err
	}
	rid := uuid.MustParse(target.subject)
	// The pairing must still stand, and the human asked still be verified.
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, rid)
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	live, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.AgentID(r.AgentID), pairing.UserID(u.ID),
		pairing.StatusEQ(pairing.StatusApproved)).Exist(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading pairing: %w", err)
	}
	if !live {
		return nil, fmt.Errorf("%w: you are no longer paired with this agent", ErrForbidden)
	}
	if r.UserID == u.ID && u.IdentityStatus != user.IdentityStatusVerified {
		return nil, fmt.Errorf("%w: approving a card purchase needs your identity verified", ErrForbidden)
	}
	r, complete, err := s.castCardApproval(ctx, rid, u)
	if err != nil {
		return nil, err
	}
	if !complete {
		return s.cardView(ctx, r)
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, r.AgentID)
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	amount := USDCAmount(r.Amount)
	limits := LimitsFor(string(a.Tier))
	policy, err := s.decideSpend(ctx, a, cardSpend(r.Amount, r.MerchantName), true)
	if err != nil {
		return nil, err
	}
	if policy.Outcome == SpendRefused {
		return nil, policy.Err()
	}
	o := s.cardReservation(a, r.Amount, amount)
	o.underLock = func(ctx context.Context, tx *ent.Tx) error {
		sent, err := sentToday(ctx, tx.Transfer, agentHolder(a), s.now())
		if err != nil {
			return err
		}
		if USDCAmount(sent + r.Amount).GreaterThan(limits.Daily) {
			return fmt.Errorf("%w: %s USD exceeds the agent's daily limit of %s USD of tier %s (%s USD already sent today)",
				ErrForbidden, amount, limits.Daily, a.Tier, USDCAmount(sent))
		}
		return policy.checkDailyCap(sent, r.Amount)
	}
	o.recorded = func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtGT(now)).
			SetStatus(cardrequest.StatusApproved).SetDecidedAt(now).SetReserveTransferID(t.ID).
			SetRefundChain(t.Chain).SetRefundTo(t.FromAddress).
			Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			cur, err := tx.CardRequest.Get(ctx, r.ID)
			if err != nil {
				return err
			}
			return errCardNotPending(cur, now)
		}
		r.Status, r.DecidedAt, r.ReserveTransferID = cardrequest.StatusApproved, &now, &t.ID
		r.RefundChain, r.RefundTo = t.Chain, t.FromAddress
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardApproved, cardEventDataOf(r, a.Username,
			fmt.Sprintf("Approved: %s USDC reserved on %s; the card follows once the reservation is on chain.", usd(amount), t.Chain)))
	}
	t, err := s.recordTransfer(ctx, o)
	if err != nil {
		return nil, err
	}
	if _, err := s.startTransfer(ctx, t, waitOrDefault(wait)); err != nil {
		s.logger.WarnContext(ctx, "card reservation not through yet", "request", r.ID, "err", err)
	}
	if err := s.advanceCard(context.WithoutCancel(ctx), r.ID); err != nil {
		s.logger.WarnContext(ctx, "card after approval; left to the cards job", "request", r.ID, "err", err)
	}
	r, err = s.cfg.DB.Ent.CardRequest.Get(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("reading card request: %w", err)
	}
	return s.cardView(ctx, r)
}

// advanceCard moves an approved request on as far as its reservation
// allows: failed when the transfer failed (nothing moved), a card issued
// once it completed. Idempotent: the request's request runs it, and the
// cards job for whatever a crash or a slow chain left.
func (s *Service) advanceCard(ctx context.Context, id uuid.UUID) error {
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != cardrequest.StatusApproved || r.CardToken != nil || r.ReserveTransferID == nil {
		return nil
	}
	t, err := s.cfg.DB.Ent.Transfer.Get(ctx, *r.ReserveTransferID)
	if err != nil {
		return fmt.Errorf("card request %s: reservation: %w", r.ID, err)
	}
	switch t.Status {
	case transfer.StatusFailed:
		return s.failCard(ctx, r, "the reservation failed on chain, nothing moved: "+t.Error)
	case transfer.StatusCompleted:
		return s.issueCard(ctx, r)
	}
	return nil // in flight: the reconciler finishes it, the job comes back
}

// failCard ends an approved request whose reservation moved nothing.
func (s *Service) failCard(ctx context.Context, r *ent.CardRequest, reason string) error {
	if len(reason) > 500 {
		reason = reason[:500]
	}
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
			SetStatus(cardrequest.StatusFailed).SetError(reason).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		r.Status, r.Error = cardrequest.StatusFailed, reason
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardFailed, cardEventDataOf(r, "", reason))
	})
}

// issueCard asks the issuer for the card (outside any transaction; the
// issuer answers the same card for the same request) and stores it
// sealed, with its one-time token, once.
func (s *Service) issueCard(ctx context.Context, r *ent.CardRequest) error {
	now := s.now().UTC()
	expires := now.Add(s.cardLifetime())
	card, err := s.cfg.CardIssuer.Issue(ctx, cardissuer.IssueRequest{
		RequestID: r.ID.String(), MaxAmountCents: r.Amount / 10_000, Merchant: r.MerchantName, ExpiresAt: expires,
	})
	if errors.Is(err, cardissuer.ErrRefused) {
		// Nothing to charge: the money goes back as for an unused card.
		return s.endUnusedCard(ctx, r, "the card issuer refused the card: "+err.Error())
	}
	if err != nil {
		return fmt.Errorf("issuing card: %w", err)
	}
	if card.ExpiresAt.After(expires) || card.ExpiresAt.IsZero() {
		card.ExpiresAt = expires
	}
	plain, err := json.Marshal(CardDetails{Number: card.Number, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear, CVC: card.CVC})
	if err != nil {
		return err
	}
	sealed, err := s.cfg.Vault.Seal(plain, cardSealAD(r.ID))
	clear(plain)
	if err != nil {
		return fmt.Errorf("sealing card: %w", err)
	}
	token := ctokFormat.New()
	cardExpires := card.ExpiresAt.UTC().Truncate(time.Microsecond)
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
			SetCardReference(card.Reference).SetCardToken(token).SetCardLast4(card.Last4()).
			SetCardSealed(sealed).SetCardExpiresAt(cardExpires).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		r.CardReference, r.CardToken, r.CardLast4, r.CardExpiresAt = &card.Reference, &token, card.Last4(), &cardExpires
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardIssued, cardEventDataOf(r, "",
			fmt.Sprintf("A single-use card ending %s for up to %s USD at %s is ready: read it once with %s.",
				card.Last4(), usd(USDCAmount(r.Amount)), r.MerchantName, ActionReadCardRequest.Mark(r.ID.String()))))
	})
}

// endUnusedCard moves an approved request to expired_unused and queues
// the return of its whole amount.
func (s *Service) endUnusedCard(ctx context.Context, r *ent.CardRequest, reason string) error {
	ended := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved)).
			SetStatus(cardrequest.StatusExpiredUnused).SetRefundAmount(r.Amount).ClearCardSealed().
			SetError(reason).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		ended = true
		r.Status, r.RefundAmount, r.Error = cardrequest.StatusExpiredUnused, r.Amount, reason
		d := cardEventDataOf(r, "", reason+fmt.Sprintf("; %s USDC returns to the agent's wallet.", usd(USDCAmount(r.Amount))))
		d.ReturnedUSD = json.Number(USDCAmount(r.Amount).String())
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardExpiredUnused, d)
	})
	if err != nil {
		return err
	}
	if ended && r.CardReference != nil {
		if err := s.cfg.CardIssuer.Close(ctx, *r.CardReference); err != nil {
			s.logger.WarnContext(ctx, "closing expired card", "request", r.ID, "err", err)
		}
	}
	return nil
}

// CardCharge is the service's answer to a card network's authorization.
type CardCharge struct {
	Approved  bool
	Reason    string // why declined
	RequestID uuid.UUID
	Charged   decimal.Decimal
	Returned  decimal.Decimal
}

func declined(reason string) *CardCharge { return &CardCharge{Reason: reason} }

// AuthorizeCardCharge decides a charge the issuer's network presents for
// the card of reference: approved once, for at most the approved amount,
// at the bound merchant, before the card's expiry; declined otherwise with
// the reason. An approval moves the request to used (a conditional update:
// of two charges racing, one is approved) with the return of amount -
// charged queued in the same transaction, then closes the card and starts
// the return (the cards job finishes it).
func (s *Service) AuthorizeCardCharge(ctx context.Context, issuerName, reference string, amountUSD decimal.Decimal, merchantName string) (*CardCharge, error) {
	if !s.CardsOn() {
		return nil, ErrCardsOff
	}
	units, err := ToBaseUnits("amount_usd", amountUSD, USDCDecimals)
	if err != nil {
		return nil, err
	}
	if !amountUSD.IsPositive() || !amountUSD.Equal(amountUSD.Truncate(2)) || !units.IsInt64() {
		return nil, Invalid("amount_usd", "must be a positive amount in whole cents")
	}
	r, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.Issuer(issuerName), cardrequest.CardReference(reference)).Only(ctx)
	if ent.IsNotFound(err) {
		return declined("unknown card"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading card: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	charged := units.Int64()
	switch {
	case r.Status == cardrequest.StatusUsed:
		return declined("card already used"), nil
	case r.Status != cardrequest.StatusApproved || r.CardExpiresAt == nil || !now.Before(*r.CardExpiresAt):
		return declined("card expired"), nil
	case !sameMerchant(r.MerchantName, merchantName):
		return declined(fmt.Sprintf("merchant not allowed: the card is bound to %s", r.MerchantName)), nil
	case charged > r.Amount:
		return declined(fmt.Sprintf("amount over the card's maximum of %s USD", usd(USDCAmount(r.Amount)))), nil
	}
	var out *CardCharge
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardExpiresAtGT(now)).
			SetStatus(cardrequest.StatusUsed).SetChargedAmount(charged).SetChargedMerchant(strings.TrimSpace(merchantName)).
			SetChargedAt(now).SetRefundAmount(r.Amount - charged).ClearCardSealed().Save(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			out = declined("card already used")
			return nil
		}
		r.Status, r.ChargedAmount, r.ChargedAt, r.RefundAmount = cardrequest.StatusUsed, &charged, &now, r.Amount-charged
		out = &CardCharge{Approved: true, RequestID: r.ID, Charged: USDCAmount(charged), Returned: USDCAmount(r.Amount - charged)}
		msg := fmt.Sprintf("%s charged %s USD to the card ending %s.", r.MerchantName, usd(out.Charged), r.CardLast4)
		if r.RefundAmount > 0 {
			msg += fmt.Sprintf(" %s USDC unspent returns to the agent's wallet.", usd(out.Returned))
		}
		d := cardEventDataOf(r, "", msg)
		d.ReturnedUSD = json.Number(out.Returned.String())
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardCharged, d)
	})
	if err != nil {
		return nil, fmt.Errorf("recording charge: %w", err)
	}
	if out.Approved {
		if err := s.cfg.CardIssuer.Close(ctx, reference); err != nil {
			s.logger.WarnContext(ctx, "closing used card", "request", r.ID, "err", err)
		}
		if r.RefundAmount > 0 {
			if _, err := s.returnCardFunds(ctx, r.ID, DefaultSendWait); err != nil {
				s.logger.WarnContext(ctx, "card return; left to the cards job", "request", r.ID, "err", err)
			}
		}
	}
	return out, nil
}

// sameMerchant compares merchant names as a network's descriptor match
// would: case and surrounding space aside.
func sameMerchant(bound, presented string) bool {
	return strings.EqualFold(strings.TrimSpace(bound), strings.TrimSpace(presented))
}

// cardReturnRef is the fixed ref of a request's return: every retry
// carries it, so the chain takes it once.
func cardReturnRef(id uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/card-return/"), id[:]...))
}

// cardSolanaResendAfter: a Solana return broadcast without a recorded
// outcome is sent again only once its blockhash has surely expired.
const cardSolanaResendAfter = 3 * time.Minute

// returnCardFunds pays a used or expired card's unspent amount from the
// treasury back to the wallet the reservation left, and records it once
// included (card.returned). It answers whether the return is done.
func (s *Service) returnCardFunds(ctx context.Context, id uuid.UUID, wait time.Duration) (bool, error) {
	r, err := s.cfg.DB.Ent.CardRequest.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if r.RefundAmount <= 0 || r.RefundedAt != nil ||
		(r.Status != cardrequest.StatusUsed && r.Status != cardrequest.StatusExpiredUnused) {
		return r.RefundedAt != nil, nil
	}
	chain := chains.Name(r.RefundChain)
	ledger, err := s.agentLedger(chain)
	if err != nil {
		return false, err
	}
	treasury := s.cfg.Treasury.Address(chain)
	ref := cardReturnRef(r.ID)
	amount := big.NewInt(r.RefundAmount)
	waitFor := func(hash string) (bool, error) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		rc, err := ledger.Wait(wctx, hash)
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return false, nil
			}
			return false, err
		}
		switch rc.State {
		case chains.TxIncluded:
			return true, s.completeCardReturn(ctx, r, hash)
		case chains.TxFailed:
			// Moved nothing: forget the hash, the next run sends again.
			return false, s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).Where(cardrequest.RefundedAtIsNil()).
				SetRefundTxHash("").ClearRefundSentAt().Exec(ctx)
		}
		return false, nil
	}
	if r.RefundTxHash != "" {
		rc, err := ledger.Receipt(ctx, r.RefundTxHash)
		if err != nil {
			return false, err
		}
		switch rc.State {
		case chains.TxIncluded:
			return true, s.completeCardReturn(ctx, r, r.RefundTxHash)
		case chains.TxPending:
			return waitFor(r.RefundTxHash)
		}
	}
	hash, found, err := ledger.FindTransfer(ctx, chains.TransferQuery{From: treasury, To: r.RefundTo, Amount: amount, Ref: ref})
	if err != nil {
		return false, err
	}
	if found {
		if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).SetRefundTxHash(hash).Exec(ctx); err != nil {
			return false, err
		}
		return waitFor(hash)
	}
	if chain == chains.Solana && r.RefundSentAt != nil && s.now().Sub(*r.RefundSentAt) < cardSolanaResendAfter {
		return false, nil // an earlier broadcast may still land
	}
	if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).Where(cardrequest.RefundedAtIsNil()).
		SetRefundSentAt(s.now().UTC()).Exec(ctx); err != nil {
		return false, err
	}
	key := append([]byte(nil), s.cfg.Treasury.Key(chain)...)
	defer clear(key)
	sub, err := ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: r.RefundTo, Amount: amount, Ref: ref})
	switch {
	case sub.TxHash != "":
		if err := s.cfg.DB.Ent.CardRequest.UpdateOneID(r.ID).SetRefundTxHash(sub.TxHash).Exec(context.WithoutCancel(ctx)); err != nil {
			return false, err
		}
		return waitFor(sub.TxHash)
	case errors.Is(err, chains.ErrAlreadyUsed):
		return false, nil // landed meanwhile: found on the next run
	case err != nil:
		return false, fmt.Errorf("card return: %w", err)
	}
	return false, errors.New("card return: no transaction hash")
}

// completeCardReturn records an included return once.
func (s *Service) completeCardReturn(ctx context.Context, r *ent.CardRequest, hash string) error {
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.CardRequest.Update().Where(cardrequest.ID(r.ID), cardrequest.RefundedAtIsNil()).
			SetRefundedAt(now).SetRefundTxHash(hash).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		d := cardEventDataOf(r, "", fmt.Sprintf("%s USDC returned to the agent's wallet on %s.", usd(USDCAmount(r.RefundAmount)), r.RefundChain))
		d.ReturnedUSD, d.TxHash = json.Number(USDCAmount(r.RefundAmount).String()), hash
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardReturned, d)
	})
}

// CardsTickStats counts what one CardsTick did.
type CardsTickStats struct {
	Expired, ExpiredUnused, Advanced, Returned int
}

// cardsTickBatch bounds each step of one tick.
const cardsTickBatch = 100

// CardsTick is the cards job: it expires pending requests past their
// deadline and approved cards past theirs (queuing their return), issues
// the cards of reservations that completed and fails those that failed,
// and drives pending returns. Every step is a conditional update from the
// state it leaves, so running it twice, or on two workers at once, or
// after a crash, does each thing once.
func (s *Service) CardsTick(ctx context.Context) (CardsTickStats, error) {
	var st CardsTickStats
	if !s.CardsOn() {
		return st, nil
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	pending, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtLTE(now)).
		Limit(cardsTickBatch).All(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, r := range pending {
		ok, err := s.expireCardRequest(ctx, r, now)
		if err != nil {
			return st, err
		}
		if ok {
			st.Expired++
		}
	}
	// Only the approved requests with something to do: a card past its
	// expiry, or no card yet. (Cards waiting for their charge would fill
	// a batch and starve the others.)
	var errs []error
	ended, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardExpiresAtLTE(now)).
		Limit(cardsTickBatch).All(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, r := range ended {
		if err := s.endUnusedCard(ctx, r, "the card expired unused"); err != nil {
			errs = append(errs, err)
			continue
		}
		st.ExpiredUnused++
	}
	unissued, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusEQ(cardrequest.StatusApproved), cardrequest.CardTokenIsNil()).
		Order(ent.Asc(cardrequest.FieldDecidedAt)).Limit(cardsTickBatch).IDs(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card requests: %w", err)
	}
	for _, id := range unissued {
		if err := s.advanceCard(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("card request %s: %w", id, err))
			continue
		}
		st.Advanced++
	}
	returns, err := s.cfg.DB.Ent.CardRequest.Query().
		Where(cardrequest.StatusIn(cardrequest.StatusUsed, cardrequest.StatusExpiredUnused),
			cardrequest.RefundAmountGT(0), cardrequest.RefundedAtIsNil()).
		Limit(cardsTickBatch).IDs(ctx)
	if err != nil {
		return st, fmt.Errorf("reading card returns: %w", err)
	}
	for _, id := range returns {
		done, err := s.returnCardFunds(ctx, id, 10*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("card return %s: %w", id, err))
			continue
		}
		if done {
			st.Returned++
		}
	}
	return st, errors.Join(errs...)
}

// expireCardRequest ends a pending request past its deadline (expired):
// nothing was reserved.
func (s *Service) expireCardRequest(ctx context.Context, r *ent.CardRequest, now time.Time) (bool, error) {
	expired := false
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.CardRequest.Update().
			Where(cardrequest.ID(r.ID), cardrequest.StatusEQ(cardrequest.StatusPendingApproval), cardrequest.ExpiresAtLTE(now)).
			SetStatus(cardrequest.StatusExpired).Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		expired = true
		r.Status = cardrequest.StatusExpired
		return s.recordCardEvents(ctx, tx, sqlTx, r, EventCardExpired, cardEventDataOf(r, "", "The request expired undecided; nothing was reserved."))
	})
	if err != nil {
		return false, fmt.Errorf("expiring card request %s: %w", r.ID, err)
	}
	return expired, nil
}

// CardApproval is what approving a card request needs from the app
// (ApprovalStart).
type CardApproval = ApprovalStart

// BeginCardApproval starts the step-up approving a request needs
// (beginApproval): a passkey assertion bound to this request when the
// human has passkeys (their own passkeys only, user verification
// required); without passkeys it answers no ceremony.
func (s *Service) BeginCardApproval(ctx context.Context, v *Viewer, id string) (*CardApproval, error) {
	return s.beginApproval(ctx, v, s.cardApprovalTarget, id)
}

// DevCardCharge is POST /dev/card/charge: a charge a tester makes as a
// merchant would, through the sandbox issuer's network (cardissuer.Network)
// and then the service's authorization. Not available when the issuer
// plays no network (a real one): ErrNotFound.
type DevCardCharge struct {
	CardNumber        string
	ExpMonth, ExpYear int
	CVC               string
	AmountUSD         decimal.Decimal
	MerchantName      string
}

// ChargeDevCard runs a DevCardCharge.
func (s *Service) ChargeDevCard(ctx context.Context, c DevCardCharge) (*CardCharge, error) {
	if !s.CardsOn() {
		return nil, ErrCardsOff
	}
	network, ok := s.cfg.CardIssuer.(cardissuer.Network)
	if !ok {
		return nil, fmt.Errorf("%w: the card issuer is not a sandbox", ErrNotFound)
	}
	switch {
	case len(c.CardNumber) > 19:
		return nil, Invalid("card_number", "is not a card number")
	case len(c.CVC) > 4:
		return nil, Invalid("cvc", "is not a CVC")
	case c.ExpMonth < 1 || c.ExpMonth > 12:
		return nil, Invalid("exp_month", "must be from 1 to 12")
	case utf8.RuneCountInString(c.MerchantName) > CardMerchantMaxLen:
		return nil, Invalid("merchant_name", "must be at most %d characters", CardMerchantMaxLen)
	case strings.TrimSpace(c.MerchantName) == "":
		return nil, Invalid("merchant_name", "is required")
	}
	ref, decline := network.Find(cardissuer.Presented{Number: c.CardNumber, ExpMonth: c.ExpMonth, ExpYear: c.ExpYear, CVC: c.CVC}, s.now())
	if decline != "" {
		return declined(decline), nil
	}
	return s.AuthorizeCardCharge(ctx, s.cfg.CardIssuer.Name(), ref, c.AmountUSD, c.MerchantName)
}
