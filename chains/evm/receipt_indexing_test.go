package evm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/stretchr/testify/require"
)

// geth answers a receipt asked while its indexer catches up with an error
// that must read as "pending", not as a failure of the chain.
func TestIndexingInProgress(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("transaction indexing is in progress"), true},
		{fmt.Errorf("rpc: %w", errors.New("transaction indexing is in progress")), true},
		{ethereum.NotFound, false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, IndexingInProgress(tc.err), "%v", tc.err)
	}
}
