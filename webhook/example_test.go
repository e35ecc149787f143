package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"agentpay/webhook"
)

// A receiver verifies a delivery against the exact bytes of the body
// before decoding it. The Standard Webhooks signature is the one that
// matters: it signs the timestamp, so an old request replayed is refused.
// X-Checkout-Signature (spec 6.1) signs the body alone; checking it too
// adds nothing against a replay.
func Example_verify() {
	const secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // as issued (registration or a roll)

	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := webhook.VerifyStandard(secret, r.Header, body, webhook.DefaultTolerance, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := webhook.Verify(secret, body, r.Header.Get(webhook.HeaderCheckoutSignature)); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Process the event once per webhook-id (a retry repeats it), then
		// answer 2xx.
		w.WriteHeader(http.StatusNoContent)
	})

	deliver := func(body []byte, signedAt time.Time, tamper bool) {
		req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
		webhook.SetSignatureHeaders(req.Header, secret, "0b7c6a0e-6e8a-4c39-9d43-2f4cf1d1b0a5", signedAt, body)
		if tamper {
			req.Body = io.NopCloser(bytes.NewReader(append(body, ' ')))
		}
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Body.String())))
	}
	event := []byte(`{"id":"0b7c6a0e-6e8a-4c39-9d43-2f4cf1d1b0a5","event":"payment.confirmed"}`)
	deliver(event, time.Now(), false)
	deliver(event, time.Now(), true)
	deliver(event, time.Now().Add(-time.Hour), false)
	// Output:
	// 204
	// 401 webhook: signature does not match
	// 401 webhook: timestamp outside the tolerance
}
