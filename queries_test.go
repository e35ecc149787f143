package agentpay

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
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
