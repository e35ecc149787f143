package x402

// Fuzz target of what a server reads from a client (the payment headers)
// and a client from a server (PAYMENT-REQUIRED, PAYMENT-RESPONSE). Seeds
// are its f.Add calls; `make fuzz` runs it
// (docs/testing.md).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// headerDecoders are the Decode functions, by the header each reads; the
// fuzz input's kind picks one.
var headerDecoders = []struct {
	header string
	decode func(string) (any, error)
}{
	{HeaderPaymentSignature, func(h string) (any, error) { return DecodePaymentSignature(h) }},
	{HeaderPaymentV1, func(h string) (any, error) { return DecodePaymentV1(h) }},
	{HeaderPaymentRequired, func(h string) (any, error) { return DecodePaymentRequired(h) }},
	{HeaderPaymentResponse, func(h string) (any, error) { return DecodePaymentResponse(h) }},
}

// FuzzDecodeHeader: whatever the header, a Decode function answers a value
// or a *HeaderError naming its header, never both, never a panic; nothing
// over MaxHeaderBytes decodes; and what decodes, encoded again by
// EncodeHeader, decodes to the same value (so a server answering what it
// read, or a client resending it, says the same thing).
func FuzzDecodeHeader(f *testing.F) {
	for i := range headerDecoders {
		f.Add(uint8(i), "")
		f.Add(uint8(i), "e30")                                                                                               // {} unpadded
		f.Add(uint8(i), base64.StdEncoding.EncodeToString([]byte(`{"x402Version":2,"accepted":{"network":"eip155:8453"}}`))) // partial
	}
	f.Fuzz(func(t *testing.T, kind uint8, header string) {
		d := headerDecoders[int(kind)%len(headerDecoders)]
		v, err := d.decode(header)
		if err != nil {
			var he *HeaderError
			if !errors.As(err, &he) || he.Header != d.header || he.Reason == "" {
				t.Fatalf("%s: refused with %v, not a HeaderError naming it", d.header, err)
			}
			return
		}
		if len(header) > MaxHeaderBytes {
			t.Fatalf("%s: decoded a %d-byte header", d.header, len(header))
		}
		again, err := EncodeHeader(v)
		if err != nil {
			t.Fatalf("%s: %+v does not encode: %v", d.header, v, err)
		}
		if len(again) > MaxHeaderBytes {
			return // grew past the bound (escapes): not decodable again by design
		}
		back, err := d.decode(again)
		if err != nil || !reflect.DeepEqual(v, back) {
			body, _ := json.Marshal(v)
			t.Fatalf("%s: %s does not decode back to itself: %v", d.header, body, err)
		}
	})
}
