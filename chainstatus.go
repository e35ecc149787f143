package agentpay

import (
	"context"
	"fmt"
	"sort"
	"time"

	"agentpay/chains"
)

// ChainStatus is a configured chain as seen right now.
type ChainStatus struct {
	Chain   chains.Name
	Mode    Mode
	Token   string
	Head    uint64
	Healthy bool
	Error   string
}

// Chain heads: what the service shows of its chains (the GraphQL chains
// query and chainHead subscriptions, /readyz) comes from this process's
// head cache (internal/headcache), never straight from a node: anyone may
// ask, as often as they like. The deposit scans this process runs feed it
// at no extra call; a head older than Config.HeadCacheTTL is read again,
// once per chain and mode however many ask. So a process costs each node at
// most one head read per TTL for its readers (none where its own scans keep
// the heads fresh, as in `agentpay dev`); a `serve` process, whose scans run
// in a worker process, reads them on demand within that bound.

// DefaultHeadCacheTTL is Config.HeadCacheTTL's default: about a block on
// the faster chains, so a chainHead subscriber misses little.
const DefaultHeadCacheTTL = time.Second

// headKey names a chain's head in the cache.
type headKey struct {
	mode  Mode
	chain chains.Name
}

// chainStatus is a chain's status as the head cache has it.
func (s *Service) chainStatus(ctx context.Context, mode Mode, l chains.Ledger) ChainStatus {
	st := ChainStatus{Chain: l.Chain(), Mode: mode, Token: l.Token()}
	h := s.heads.Get(ctx, headKey{mode, l.Chain()}, func(ctx context.Context) (uint64, error) {
		n, err := l.Head(ctx)
		if err != nil {
			s.logger.WarnContext(ctx, "chain head", "chain", l.Chain(), "mode", mode, "err", err)
		}
		return n, err
	})
	if h.Err != nil {
		st.Error = "unreachable"
		return st
	}
	st.Head, st.Healthy = h.Number, true
	return st
}

// ChainStatuses reports every configured chain, from the head cache; heads
// to read again are read concurrently, so one slow RPC does not add up with
// the others.
func (s *Service) ChainStatuses(ctx context.Context) []ChainStatus {
	type probe struct {
		mode   Mode
		ledger chains.Ledger
	}
	var probes []probe
	for _, mode := range []Mode{ModeLive, ModeTest} {
		for _, n := range s.networks(mode) {
			probes = append(probes, probe{mode, n.Ledger})
		}
	}
	out := make([]ChainStatus, len(probes))
	done := make(chan struct{}, len(probes))
	for i, p := range probes {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = s.chainStatus(ctx, p.mode, p.ledger)
		}()
	}
	for range probes {
		<-done
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode < out[j].Mode
		}
		return chainOrder(out[i].Chain) < chainOrder(out[j].Chain)
	})
	return out
}

func chainOrder(n chains.Name) int {
	for i, c := range chains.All {
		if c == n {
			return i
		}
	}
	return len(chains.All)
}

// Ready reports whether the database and every configured chain answer
// (the chains as the head cache has them).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.cfg.DB.Ping(ctx); err != nil {
		s.logger.WarnContext(ctx, "database ping", "err", err)
		return fmt.Errorf("%w: database unreachable", ErrUnavailable)
	}
	for _, st := range s.ChainStatuses(ctx) {
		if !st.Healthy {
			return fmt.Errorf("%w: %s (%s) unreachable", ErrUnavailable, st.Chain, st.Mode)
		}
	}
	return nil
}

// ChainHead reads the chain's head from its node, past the head cache: the
// worker's head watch asks it often, to scan a new block at once.
func (s *Service) ChainHead(ctx context.Context, mode Mode, chain chains.Name) (uint64, error) {
	l, err := s.ledger(mode, chain)
	if err != nil {
		return 0, err
	}
	return l.Head(ctx)
}

// ChainStatus reports one configured chain, from the head cache.
func (s *Service) ChainStatus(ctx context.Context, mode Mode, chain chains.Name) (ChainStatus, error) {
	l, err := s.ledger(mode, chain)
	if err != nil {
		return ChainStatus{}, err
	}
	return s.chainStatus(ctx, mode, l), nil
}

// WatchChainHead sends the chain's status now and each time its head
// advances (or its health changes), until ctx ends. It looks every `every`,
// in the head cache: subscribers add no calls to the chain's node.
func (s *Service) WatchChainHead(ctx context.Context, mode Mode, chain chains.Name, every time.Duration) (<-chan ChainStatus, error) {
	first, err := s.ChainStatus(ctx, mode, chain)
	if err != nil {
		return nil, err
	}
	out := make(chan ChainStatus, 1)
	out <- first
	go func() {
		defer close(out)
		last := first
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := s.ChainStatus(ctx, mode, chain)
			if err != nil || (st.Head == last.Head && st.Healthy == last.Healthy) {
				continue
			}
			last = st
			select {
			case out <- st:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
