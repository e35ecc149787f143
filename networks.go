package agentpay

import (
	"agentpay/chains"
)

// The chains the service is configured with, by mode: the ledgers of each
// mode's networks (Config.Live, Config.Test) and the address machinery of
// each chain family (Config.Families). What the service shows of their
// heads is chainstatus.go.

// Mode separates real money from test money: live keys use the main
// networks, test keys the test networks (the local devnets in dev).
type Mode string

const (
	ModeLive Mode = "live"
	ModeTest Mode = "test"
)

// ParseMode turns an API value into a Mode.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeLive, ModeTest:
		return Mode(s), nil
	}
	return "", Invalid("mode", "must be live or test")
}

// wallets is the key and address machinery of chain's family.
func (s *Service) wallets(chain chains.Name) chains.Wallets {
	return s.cfg.Families[chain.Family()]
}

// networks returns the ledgers of a mode.
func (s *Service) networks(mode Mode) chains.Networks {
	if mode == ModeLive {
		return s.cfg.Live
	}
	return s.cfg.Test
}

// ledger returns the ledger of a chain in a mode, or a validation error
// naming the chain when it is not configured, so a missing RPC is refused up
// front rather than failing later.
func (s *Service) ledger(mode Mode, chain chains.Name) (chains.Ledger, error) {
	if !chain.Valid() {
		_, err := chains.ParseName(string(chain))
		return nil, Invalid("chain", "%s", err)
	}
	n, ok := s.networks(mode)[chain]
	if !ok {
		return nil, Invalid("chain", "%s is not available in %s mode", chain, mode)
	}
	return n.Ledger, nil
}

// agentLedger returns the ledger agents' wallets use on a chain.
func (s *Service) agentLedger(chain chains.Name) (chains.Ledger, error) {
	return s.ledger(s.cfg.AgentMode, chain)
}

// ScannedChain is a chain the worker scans for deposits.
type ScannedChain struct {
	Mode  Mode
	Chain chains.Name
}

// ScannedChains lists every configured chain that has a deposit watcher.
func (s *Service) ScannedChains() []ScannedChain {
	var out []ScannedChain
	for _, mode := range []Mode{ModeLive, ModeTest} {
		for _, name := range chains.All {
			if n, ok := s.networks(mode)[name]; ok && n.NewWatcher != nil {
				out = append(out, ScannedChain{Mode: mode, Chain: name})
			}
		}
	}
	return out
}
