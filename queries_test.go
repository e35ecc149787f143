package agentpay

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
)

func TestListPageHasMore(t *testing.T) {
	for _, tt := range []struct {
		offset, limit, n, total int
		more                    bool
	}{
		{0, 20, 0, 0, false},
		{0, 20, 20, 20, false},
		{0, 20, 20, 21, true},
		{20, 20, 1, 21, false},
		{40, 20, 0, 3, false}, // past the end
	} {
		t.Run(fmt.Sprintf("%d+%d/%d", tt.offset, tt.n, tt.total), func(t *testing.T) {
			p := ListParams{Limit: tt.limit, Offset: tt.offset}.page(tt.total, tt.n)
			require.Equal(t, ListPage{Total: tt.total, Limit: tt.limit, Offset: tt.offset, HasMore: tt.more}, p)
		})
	}
}

// TestFiltersNameEachValueOnce: a filter list as long as a request body
// allows (more values than SQLite or PostgreSQL take as parameters) is read
// as the few distinct values it names.
func TestFiltersNameEachValueOnce(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	_, test := merchantAuths(t, svc)
	_, err := svc.CreateSession(ctx, test, SessionInput{Amount: decp("5"), Currency: "USD"})
	require.NoError(t, err)

	const n = 70_000 // over SQLite's 32,766 and PostgreSQL's 65,535 parameters
	statuses := make([]checkoutsession.Status, n)
	payStatuses := make([]payment.Status, n)
	kinds := make([]string, n)
	for i := range n {
		statuses[i] = checkoutsession.StatusPending
		payStatuses[i] = payment.StatusConfirmed
		kinds[i] = "session.expired"
	}
	conn, err := svc.SessionsPage(ctx, test, SessionFilter{Statuses: statuses}, PageArgs{}, nil)
	require.NoError(t, err)
	require.Len(t, conn.Edges, 1)
	_, err = svc.PaymentsPage(ctx, test, PaymentFilter{Statuses: payStatuses}, PageArgs{}, nil)
	require.NoError(t, err)
	_, err = svc.WebhookEventsPage(ctx, test, WebhookEventFilter{EventTypes: kinds}, PageArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, distinct([]string{"b", "a", "b", "b", "a"}))
}
