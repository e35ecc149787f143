package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"agentpay"
	"agentpay/graph/model"
)

// merchantEventModel is a feed line as GraphQL shows it; data keeps the
// webhook body's numbers exact (json.Number).
func merchantEventModel(it agentpay.MerchantFeedItem) (*model.MerchantEvent, error) {
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(it.Data))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("merchant feed line %d: %w", it.Cursor, err)
	}
	out := &model.MerchantEvent{
		Cursor: it.Cursor, Kind: model.MerchantEventKindEvent, EventID: it.EventID, EventType: it.EventType,
		Livemode: it.Livemode, CreatedAt: it.CreatedAt, Data: data,
	}
	if a := it.Attempt; a != nil {
		out.Kind = model.MerchantEventKindDeliveryAttempt
		out.Attempt = &model.MerchantDeliveryAttempt{
			DeliveryID: a.DeliveryID, Number: a.Number, Result: a.Result,
			DurationMs: a.DurationMs, NextRetryAt: a.NextRetryAt, At: a.At,
		}
		if a.StatusCode != 0 {
			out.Attempt.StatusCode = &a.StatusCode
		}
		if a.Error != "" {
			out.Attempt.Error = renderGraphQLPtr(&a.Error)
		}
	}
	return out, nil
}

// watchMerchantEvents turns the service's feed watch into the
// subscription's stream. It adds no buffer: a slow client holds the watch
// back (its lines wait in the table), it does not grow memory.
func (r *Resolver) watchMerchantEvents(ctx context.Context, auth *agentpay.MerchantAuth, after *int64) (<-chan *model.MerchantEvent, error) {
	items, err := r.cfg.Service.WatchMerchantEvents(ctx, auth, after)
	if err != nil {
		return nil, err
	}
	out := make(chan *model.MerchantEvent)
	go func() {
		defer close(out)
		for it := range items {
			m, err := merchantEventModel(it)
			if err != nil {
				continue // event payloads are JSON objects: cannot happen
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
