package agentpay

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchant"
	"agentpay/ent/refund"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
)

// ACP order webhooks (ACP 2026-04-17, openapi.agentic_checkout_webhook.yaml):
// beside agentpay's own webhooks, the seller POSTs the agent platform's
// endpoint {"type": "order_create"|"order_update", "data": <Order>}, the
// full Order every time (never a delta), signed in
//
//	Merchant-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>
//
// The receiver refuses a timestamp more than 300 s off. The URL and the
// secret are the merchant's, per mode (a test key sets test mode's only);
// the secret is issued by agentpay, shown once, sealed by the vault.
//
// When: order_create when the ACP checkout completes (its session is
// confirmed: ACP's `completed`, the moment its answer carries `order`),
// with order status `confirmed`; order_update at each refund's creation,
// completion or failure (an `adjustments` entry of type refund, and the
// `amount_refunded` total). No order exists before completion, so a
// checkout cancelled or expired unpaid sends nothing; a paid session cannot
// be cancelled. Fulfillment is the merchant's business: the order stays
// `confirmed`.
//
// Each event is a row written in the transaction of the change it reports
// (RecordEvent), with the River job that sends it; tries follow the
// merchant webhooks' schedule (webhookRetryDelays), to the URL and with the
// secret of the moment, signed at the moment of the try, and a session's
// events go out in order (a later one waits while an earlier is pending).

// The ACP order event types.
const (
	ACPOrderCreate = "order_create"
	ACPOrderUpdate = "order_update"
)

// ACPSignatureHeader carries the signature of an ACP order webhook.
const ACPSignatureHeader = "Merchant-Signature"

// ACPSignatureTolerance is how far from now ACP recommends receivers accept
// a signature's timestamp.
const ACPSignatureTolerance = 300 * time.Second

// acpWebhookSecretPrefix marks an ACP webhook secret (so a leaked one is
// recognised); the HMAC key is the whole string's bytes.
const acpWebhookSecretPrefix = "acpwhsec_"

// ACPWebhookSecretWarning goes with a new ACP webhook secret.
const ACPWebhookSecretWarning = "Store this ACP webhook secret now and give it to the agent platform: it is shown only once. It signs every ACP order webhook of this mode (Merchant-Signature), and a roll replaces it at once (ACP's header carries one signature)."

// ACPSignature is the Merchant-Signature value of body signed at `at`.
func ACPSignature(secret string, at time.Time, body []byte) string {
	t := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// ErrACPSignature is why VerifyACPSignature refused a header.
var ErrACPSignature = errors.New("invalid Merchant-Signature")

// VerifyACPSignature is a receiver's check: header is t=<unix>,v1=<64 hex>
// of body under secret, its timestamp within ACPSignatureTolerance of now.
func VerifyACPSignature(secret, header string, body []byte, now time.Time) error {
	ts, sig, ok := strings.Cut(header, ",")
	tv, okT := strings.CutPrefix(ts, "t=")
	v1, okV := strings.CutPrefix(sig, "v1=")
	if !ok || !okT || !okV || len(v1) != 64 {
		return fmt.Errorf("%w: must be t=<timestamp>,v1=<64 hex>", ErrACPSignature)
	}
	unix, err := strconv.ParseInt(tv, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: bad timestamp", ErrACPSignature)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > ACPSignatureTolerance || d < -ACPSignatureTolerance {
		return fmt.Errorf("%w: timestamp outside the allowed window", ErrACPSignature)
	}
	got, err := hex.DecodeString(v1)
	if err != nil {
		return fmt.Errorf("%w: v1 is not hex", ErrACPSignature)
	}
	want := ACPSignature(secret, time.Unix(unix, 0), body)
	wantMAC, _ := hex.DecodeString(want[strings.Index(want, "v1=")+3:])
	if !hmac.Equal(got, wantMAC) {
		return fmt.Errorf("%w: verification failed", ErrACPSignature)
	}
	return nil
}

// IsACPSession reports whether a session was created through the ACP
// facade (its line items are kept in its metadata).
func IsACPSession(cs *ent.CheckoutSession) bool {
	_, ok := cs.Metadata[ACPMetadataKey]
	return ok
}

// ACPOrderID is the id of the order an ACP checkout's completion creates.
func ACPOrderID(sessionExternalID string) string { return "ord_" + sessionExternalID }

// acpEndpoint is one mode's ACP webhook settings of a merchant.
type acpEndpoint struct {
	url    string
	secret []byte
}

func acpEndpointOf(m *ent.Merchant, mode Mode) acpEndpoint {
	if mode == ModeLive {
		return acpEndpoint{m.AcpWebhookURL, m.AcpWebhookSecretEncrypted}
	}
	return acpEndpoint{m.TestAcpWebhookURL, m.TestAcpWebhookSecretEncrypted}
}

// acpSecretAD binds a sealed ACP secret to its merchant and mode, apart
// from the merchant's own webhook secrets.
func acpSecretAD(merchantID uuid.UUID, mode Mode) []byte {
	return append(append([]byte{}, merchantID[:]...), "/acp/"+string(mode)...)
}

// ACPWebhookSettings is one mode's ACP webhook settings as the merchant
// sees them; Secret is set only by the call that issued it.
type ACPWebhookSettings struct {
	URL       string
	Livemode  bool
	SecretSet bool
	Secret    string
}

func acpSettings(m *ent.Merchant, mode Mode) *ACPWebhookSettings {
	ep := acpEndpointOf(m, mode)
	return &ACPWebhookSettings{URL: ep.url, Livemode: mode == ModeLive, SecretSet: len(ep.secret) > 0}
}

// ACPWebhook is the caller's mode's ACP webhook settings.
func (s *Service) ACPWebhook(ctx context.Context, auth *MerchantAuth) (*ACPWebhookSettings, error) {
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, auth.Merchant.ID)
	if err != nil {
		return nil, fmt.Errorf("reading merchant: %w", err)
	}
	return acpSettings(m, auth.Mode), nil
}

// SetACPWebhook sets the ACP webhook URL of the caller's key's mode ("":
// none, the events are no longer recorded), with the rules of the
// merchant's webhook_url. The first URL of a mode issues its secret,
// returned this once.
func (s *Service) SetACPWebhook(ctx context.Context, auth *MerchantAuth, url string) (*ACPWebhookSettings, error) {
	url = strings.TrimSpace(url)
	if url != "" {
		if err := ValidateWebhookURL(url, s.webhookMayReachPrivate(auth.Mode)); err != nil {
			var v *ValidationError
			if errors.As(err, &v) {
				return nil, Invalid("url", "%s", v.Message)
			}
			return nil, err
		}
	}
	return s.changeACPWebhook(ctx, auth, func(m *ent.Merchant, u *ent.MerchantUpdateOne, sealed []byte) bool {
		if auth.Mode == ModeLive {
			u.SetAcpWebhookURL(url)
		} else {
			u.SetTestAcpWebhookURL(url)
		}
		return url != "" && len(acpEndpointOf(m, auth.Mode).secret) == 0
	})
}

// RollACPWebhookSecret replaces the ACP webhook secret of the caller's
// key's mode at once (ACP's header has room for one signature, so there is
// no overlap) and returns the new one, this once.
func (s *Service) RollACPWebhookSecret(ctx context.Context, auth *MerchantAuth) (*ACPWebhookSettings, error) {
	return s.changeACPWebhook(ctx, auth, func(*ent.Merchant, *ent.MerchantUpdateOne, []byte) bool { return true })
}

// changeACPWebhook applies change to the merchant's row under its lock; a
// change answering true stores a new secret, returned in the settings.
func (s *Service) changeACPWebhook(ctx context.Context, auth *MerchantAuth, change func(*ent.Merchant, *ent.MerchantUpdateOne, []byte) bool) (*ACPWebhookSettings, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	mode := auth.Mode
	plain, err := newACPWebhookSecret()
	if err != nil {
		return nil, err
	}
	sealed, err := s.cfg.Vault.Seal([]byte(plain), acpSecretAD(auth.Merchant.ID, mode))
	if err != nil {
		return nil, fmt.Errorf("sealing ACP webhook secret: %w", err)
	}
	var out *ACPWebhookSettings
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
		if !m.Active {
			return errMerchantDeactivated
		}
		u := tx.Merchant.UpdateOneID(m.ID)
		issue := change(m, u, sealed)
		if issue {
			if mode == ModeLive {
				u.SetAcpWebhookSecretEncrypted(sealed)
			} else {
				u.SetTestAcpWebhookSecretEncrypted(sealed)
			}
		}
		if m, err = u.Save(ctx); err != nil {
			return fmt.Errorf("updating merchant: %w", err)
		}
		out = acpSettings(m, mode)
		if issue {
			out.Secret = plain
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func newACPWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("issuing ACP webhook secret: %w", err)
	}
	return acpWebhookSecretPrefix + hex.EncodeToString(b[:]), nil
}

// acpOrderEventFor is the ACP event one of agentpay's events causes on an
// ACP session ("" for none).
func acpOrderEventFor(eventType string) string {
	switch eventType {
	case EventPaymentConfirmed:
		return ACPOrderCreate
	case EventRefundCreated, EventRefundCompleted, EventRefundFailed:
		return ACPOrderUpdate
	}
	return ""
}

// queueACPOrderEvent records, in the transaction of ev, the ACP order
// event ev causes when its session is an ACP checkout with an order and
// the merchant set an ACP webhook URL in its mode, and enqueues its
// delivery. The first event of a session is order_create whatever caused
// it (an URL set after completion: the platform learns the order at its
// first change); order_create is never sent twice (the session's seq 1).
func (s *Service) queueACPOrderEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, m *ent.Merchant, ev EventInput) error {
	kind := acpOrderEventFor(ev.Type)
	if kind == "" || ev.SessionID == nil || acpEndpointOf(m, sessionModeOf(ev.Livemode)).url == "" {
		return nil
	}
	// The session's row is locked so two changes of one order (a refund
	// created while another completes) number their events one after the
	// other instead of colliding on (session_id, seq). NO KEY UPDATE: the
	// webhook event RecordEvent just inserted holds KEY SHARE on the row
	// (its session_id foreign key), as does the other change's, which FOR
	// UPDATE would deadlock on. SQLite
	// runs one writer at a time.
	if s.cfg.DB.IsPostgres() {
		if _, err := sqlTx.ExecContext(ctx, `SELECT 1 FROM checkout_sessions WHERE id = $1 FOR NO KEY UPDATE`, *ev.SessionID); err != nil {
			return fmt.Errorf("locking session: %w", err)
		}
	}
	sess, err := tx.CheckoutSession.Get(ctx, *ev.SessionID)
	if err != nil {
		return fmt.Errorf("reading session: %w", err)
	}
	if !IsACPSession(sess) || sess.Status != checkoutsession.StatusConfirmed {
		return nil
	}
	last, err := tx.ACPOrderEvent.Query().Where(acporderevent.SessionID(sess.ID)).
		Order(ent.Desc(acporderevent.FieldSeq)).Select(acporderevent.FieldSeq).Ints(ctx)
	if err != nil {
		return fmt.Errorf("reading ACP order events: %w", err)
	}
	seq := 1
	if len(last) > 0 {
		if kind == ACPOrderCreate {
			return nil // the order exists already
		}
		seq = last[0] + 1
	} else {
		kind = ACPOrderCreate
	}
	order, err := s.acpOrder(ctx, tx, sess)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(acpWebhookEvent{Type: kind, Data: order})
	if err != nil {
		return fmt.Errorf("ACP order event: %w", err)
	}
	now := s.now().UTC() // the service's clock, as the other webhook rows
	e, err := tx.ACPOrderEvent.Create().
		SetMerchantID(m.ID).SetSessionID(sess.ID).SetLivemode(sess.Livemode).
		SetSeq(seq).SetEventType(acporderevent.EventType(kind)).SetPayload(payload).
		SetCreatedAt(now.Truncate(time.Microsecond)).SetUpdatedAt(now.Truncate(time.Microsecond)).
		SetNextAttemptAt(now).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("recording ACP order event: %w", err)
	}
	if s.cfg.Jobs == nil {
		return errors.New("agentpay: Config.Jobs is required to deliver ACP order webhooks")
	}
	opts := &river.InsertOpts{MaxAttempts: s.webhookTries() + webhookJobSpareAttempts}
	if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, jobs.DeliverACPOrderEventArgs{EventID: e.ID}, opts); err != nil {
		return fmt.Errorf("agentpay: enqueueing ACP order webhook: %w", err)
	}
	return nil
}

// The ACP Order as the webhooks send it (schema.agentic_checkout.json
// $defs/Order), amounts in US cents.
type acpWebhookEvent struct {
	Type string   `json:"type"`
	Data acpOrder `json:"data"`
}

type acpOrder struct {
	Type              string             `json:"type"`
	ID                string             `json:"id"`
	CheckoutSessionID string             `json:"checkout_session_id"`
	PermalinkURL      string             `json:"permalink_url"`
	Status            string             `json:"status"`
	LineItems         []acpOrderLineItem `json:"line_items"`
	Adjustments       []acpAdjustment    `json:"adjustments"`
	Totals            []acpTotal         `json:"totals"`
}

type acpOrderLineItem struct {
	ID        string           `json:"id"`
	Title     string           `json:"title"`
	ProductID string           `json:"product_id"`
	Quantity  acpOrderQuantity `json:"quantity"`
	UnitPrice int64            `json:"unit_price"`
	Subtotal  int64            `json:"subtotal"`
	Status    string           `json:"status"`
}

type acpOrderQuantity struct {
	Ordered   int `json:"ordered"`
	Current   int `json:"current"`
	Fulfilled int `json:"fulfilled"`
}

type acpAdjustment struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	OccurredAt  string `json:"occurred_at"`
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
}

type acpTotal struct {
	Type        string `json:"type"`
	DisplayText string `json:"display_text"`
	Amount      int64  `json:"amount"`
}

// acpCents is a USD amount in whole cents, rounded down: ACP's amounts are
// integer minor units, and a USDC refund may carry fractions of a cent
// (the exact amount is in the adjustment's description and in agentpay's
// own refund.* webhook).
func acpCents(usd decimal.Decimal) int64 {
	return usd.Shift(SessionAmountDecimals).Floor().IntPart()
}

// acpAdjustmentStatus is a refund's status in ACP's adjustment words.
func acpAdjustmentStatus(st refund.Status) string {
	switch st {
	case refund.StatusCompleted:
		return "completed"
	case refund.StatusFailed:
		return "failed"
	}
	return "pending"
}

// acpOrder is the full Order of a confirmed ACP session as it is in tx.
func (s *Service) acpOrder(ctx context.Context, tx *ent.Tx, sess *ent.CheckoutSession) (acpOrder, error) {
	permalink, _ := s.SessionURLs(sess.ExternalID)
	total := acpCents(sess.AmountUsd)
	o := acpOrder{
		Type: "order", ID: ACPOrderID(sess.ExternalID), CheckoutSessionID: sess.ExternalID,
		PermalinkURL: permalink, Status: "confirmed", LineItems: []acpOrderLineItem{}, Adjustments: []acpAdjustment{},
	}
	for i, it := range ACPLineItems(sess) {
		title := it.Name
		if title == "" {
			title = it.ID
		}
		o.LineItems = append(o.LineItems, acpOrderLineItem{
			ID: sess.ExternalID + "_li_" + strconv.Itoa(i), Title: title, ProductID: it.ID,
			Quantity:  acpOrderQuantity{Ordered: 1, Current: 1},
			UnitPrice: it.UnitAmount, Subtotal: it.UnitAmount, Status: "processing",
		})
	}
	refunds, err := tx.Refund.Query().Where(refund.SessionID(sess.ID)).
		Order(ent.Asc(refund.FieldCreatedAt), ent.Asc(refund.FieldID)).All(ctx)
	if err != nil {
		return acpOrder{}, fmt.Errorf("reading refunds: %w", err)
	}
	refunded := decimal.Zero
	for _, r := range refunds {
		at := r.CreatedAt
		if r.CompletedAt != nil {
			at = *r.CompletedAt
		}
		st := acpAdjustmentStatus(r.Status)
		if st == "completed" {
			refunded = refunded.Add(r.AmountUsd)
		}
		desc := "Refund of " + r.AmountUsd.String() + " " + r.Token
		if r.Reason != "" {
			desc += ": " + r.Reason
		}
		o.Adjustments = append(o.Adjustments, acpAdjustment{
			ID: r.ExternalID, Type: "refund", OccurredAt: at.UTC().Format(time.RFC3339), Status: st,
			Amount: acpCents(r.AmountUsd), Currency: "usd", Description: truncateUTF8(desc, 500),
		})
	}
	o.Totals = []acpTotal{
		{Type: "subtotal", DisplayText: "Subtotal", Amount: total},
		{Type: "total", DisplayText: "Total", Amount: total},
	}
	if refunded.IsPositive() {
		o.Totals = append(o.Totals, acpTotal{Type: "amount_refunded", DisplayText: "Refunded", Amount: acpCents(refunded)})
	}
	return o, nil
}

// ACPOrderEvents is a session's ACP order events in order (the merchant's
// log of them; tests read it).
func (s *Service) ACPOrderEvents(ctx context.Context, auth *MerchantAuth, sessionExternalID string) ([]*ent.ACPOrderEvent, error) {
	sess, err := s.MerchantSession(ctx, auth, sessionExternalID)
	if err != nil {
		return nil, err
	}
	return s.cfg.DB.Ent.ACPOrderEvent.Query().Where(acporderevent.SessionID(sess.ID)).
		Order(ent.Asc(acporderevent.FieldSeq)).All(ctx)
}
