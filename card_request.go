package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/pairing"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
	"agentpay/internal/idempotency"
)

// An agent's card purchase request (cards.go has the lifecycle): its
// checks, its human, its Idempotency-Key and the mail that asks for a
// decision.

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
