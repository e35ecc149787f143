package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"time"
	"unicode/utf8"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/predicate"
)

// What the merchant dashboard's pages need of the merchant API beyond the
// REST facade's calls (docs/dashboard.md): payments per day, sessions by a
// search term, a test event. Each is a merchant call like the others,
// scoped to the caller's merchant and mode, so a secret key may use it
// too.

// MaxPaymentVolumeDays bounds the range PaymentVolume counts.
const MaxPaymentVolumeDays = 366

// PaymentVolume is the payments of one UTC day, chain and status.
type PaymentVolume struct {
	// Day is 2006-01-02 (UTC).
	Day    string
	Chain  string
	Status string
	Count  int
	// Volume is the token amount received, exact.
	Volume decimal.Decimal
}

// PaymentVolumes counts and sums the caller's payments created in [from,
// to), per UTC day, chain and status, ordered by all three. A range that
// is empty, reversed or longer than MaxPaymentVolumeDays is a
// ValidationError. One grouped query: its size is days × chains ×
// statuses whatever the number of payments.
func (s *Service) PaymentVolumes(ctx context.Context, auth *MerchantAuth, from, to time.Time) ([]PaymentVolume, error) {
	if !from.Before(to) {
		return nil, Invalid("to", "must be after from")
	}
	if to.Sub(from) > MaxPaymentVolumeDays*24*time.Hour {
		return nil, Invalid("to", "the range is at most %d days", MaxPaymentVolumeDays)
	}
	day, p := "substr(p.created_at, 1, 10)", func(i int) string { return "?" }
	if s.cfg.DB.IsPostgres() {
		day, p = "to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')", func(i int) string { return fmt.Sprintf("$%d", i) }
	}
	q := "SELECT " + day + " AS day, p.chain, p.status, COUNT(*), SUM(p.amount_token)" +
		" FROM payments p JOIN checkout_sessions cs ON cs.id = p.session_id" +
		" WHERE cs.merchant_id = " + p(1) + " AND cs.livemode = " + p(2) +
		" AND p.created_at >= " + p(3) + " AND p.created_at < " + p(4) +
		" GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
	rows, err := s.cfg.DB.SQL.QueryContext(ctx, q, auth.Merchant.ID, auth.Livemode(), from.UTC(), to.UTC())
	if err != nil {
		return nil, fmt.Errorf("counting payments: %w", err)
	}
	defer rows.Close()
	var out []PaymentVolume
	for rows.Next() {
		var (
			v   PaymentVolume
			sum sql.NullString
		)
		if err := rows.Scan(&v.Day, &v.Chain, &v.Status, &v.Count, &sum); err != nil {
			return nil, fmt.Errorf("counting payments: %w", err)
		}
		units := new(big.Int)
		if sum.Valid {
			if _, ok := units.SetString(sum.String, 10); !ok {
				return nil, fmt.Errorf("counting payments: a sum that is not an integer: %q", sum.String)
			}
		}
		v.Volume = FromBaseUnits(units, USDCDecimals)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting payments: %w", err)
	}
	return out, nil
}

// SessionSearchMaxLen bounds a session search term.
const SessionSearchMaxLen = 200

// sessionSearch matches sessions whose external id is term, or whose
// metadata has a top-level string value equal to it.
func (s *Service) sessionSearch(term string) (predicate.CheckoutSession, error) {
	if term == "" || utf8.RuneCountInString(term) > SessionSearchMaxLen {
		return nil, Invalid("search", "must be 1 to %d characters", SessionSearchMaxLen)
	}
	each := "json_each"
	if s.cfg.DB.IsPostgres() {
		each = "jsonb_each_text"
	}
	inMetadata := predicate.CheckoutSession(func(sel *entsql.Selector) {
		sel.Where(entsql.P(func(b *entsql.Builder) {
			b.WriteString("EXISTS (SELECT 1 FROM " + each + "(").
				WriteString(sel.C(checkoutsession.FieldMetadata)).
				WriteString(") AS kv WHERE kv.value = ").
				Arg(term).
				WriteString(")")
		}))
	})
	return checkoutsession.Or(checkoutsession.ExternalID(term), inMetadata), nil
}

// SendTestWebhook records a webhook.test event in the caller's mode,
// delivered like any other to that mode's webhook URL (the event's
// deliveries show the tries). Without a webhook URL in that mode it is a
// ValidationError, past TestWebhooksPerMerchant this hour a
// *RateLimitError (webhook_limits.go); either records nothing.
func (s *Service) SendTestWebhook(ctx context.Context, auth *MerchantAuth) (*ent.WebhookEvent, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	if WebhookURLOf(auth.Merchant, auth.Mode) == "" {
		return nil, Invalid("webhook_url", "is not set: there is nowhere to send a test event")
	}
	if err := s.allowTestWebhook(ctx, auth.Merchant.ID, auth.Mode); err != nil {
		return nil, err
	}
	var out *ent.WebhookEvent
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		out, err = s.RecordEvent(ctx, tx, sqlTx, EventInput{
			MerchantID: auth.Merchant.ID,
			Type:       EventWebhookTest,
			Livemode:   auth.Livemode(),
			Data:       EventData{Extra: map[string]any{"message": "A test event sent from the agentpay dashboard or API."}},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
