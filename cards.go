package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqljson"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/pairing"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
	"agentpay/internal/idempotency"
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
	view, err := s.PeekAgentCardRequest(ctx, a, id)
	if err != nil {
		return nil, err
	}
	r := view.Request
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

// PeekAgentCardRequest is one of the agent's requests without its card's
// details: a read that must not spend the one reveal (an MCP client
// cancelling its task, say).
func (s *Service) PeekAgentCardRequest(ctx context.Context, a *ent.Agent, id string) (*CardRequestView, error) {
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
	return s.cardView(ctx, r)
}

// cardSealAD binds a sealed card to its request: the details sealed for
// one request cannot be opened as another's.
func cardSealAD(id uuid.UUID) []byte { return []byte("agentpay/card/" + id.String()) }
