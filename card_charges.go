package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/cardissuer"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
)

// A card's charge (cards.go has the lifecycle): the card network asks the
// service to authorize it, and the service decides against the approved
// amount and merchant; `agentpay dev` plays the network.

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
