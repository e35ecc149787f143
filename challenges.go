package agentpay

import (
	"context"
	"fmt"
	"time"

	"agentpay/ent/signaturechallenge"
)

// PruneSignatureChallenges deletes the signature challenges that expired
// before now: every signature-message request writes one, and once expired
// a challenge can no longer be used (a replayed message is refused whether
// its challenge is expired or gone). It returns how many it deleted.
func (s *Service) PruneSignatureChallenges(ctx context.Context, now time.Time) (int, error) {
	n, err := s.cfg.DB.Ent.SignatureChallenge.Delete().
		Where(signaturechallenge.ExpiresAtLT(now.UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning signature challenges: %w", err)
	}
	return n, nil
}
