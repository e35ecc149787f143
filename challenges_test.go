package agentpay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPruneSignatureChallenges(t *testing.T) {
	ctx := context.Background()
	svc := newEIP712TestService(t)
	_, addr := newEVMKey(t)
	old := time.Now().Add(-time.Hour)
	expired, err := svc.SignatureMessage(withClock(ctx, func() time.Time { return old }), "old_one", addr)
	require.NoError(t, err)
	fresh, err := svc.SignatureMessage(ctx, "fresh_one", addr)
	require.NoError(t, err)

	n, err := svc.PruneSignatureChallenges(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	left, err := svc.cfg.DB.Ent.SignatureChallenge.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, fresh.Nonce, left[0].Nonce)
	require.NotEqual(t, expired.Nonce, left[0].Nonce)

	n, err = svc.PruneSignatureChallenges(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")
}
