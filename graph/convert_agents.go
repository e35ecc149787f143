package graph

import (
	"maps"
	"slices"
	"sort"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/transfer"
	"agentpay/graph/model"
)

// Conversions from the service layer's answers to the agent API's GraphQL
// models. They choose field names and shapes, nothing else: which agent,
// which amounts and which limits are the service's answers.

// publicAgent is what anyone may see of an agent.
func publicAgent(a *ent.Agent) *model.PublicAgent {
	return &model.PublicAgent{
		ID:                a.ID,
		Username:          a.Username,
		CreatedAt:         a.CreatedAt,
		Tier:              a.Tier,
		TrustScore:        a.TrustScore,
		TxCount:           int(a.TxCount),
		VolumeSentUsd:     agentpay.USDCAmount(a.VolumeSent),
		VolumeReceivedUsd: agentpay.USDCAmount(a.VolumeReceived),
	}
}

func publicProfile(p *agentpay.AgentProfile) *model.PublicAgent {
	return publicAgent(p.Agent)
}

// meModel is the authenticated agent's own profile; limits, balance and
// transfers are resolved only when asked for.
func meModel(p *agentpay.AgentProfile) *model.Me {
	a := p.Agent
	return &model.Me{
		ID:              a.ID,
		Username:        a.Username,
		CreatedAt:       a.CreatedAt,
		Tier:            a.Tier,
		TrustScore:      a.TrustScore,
		Trust:           trustModel(p.Trust),
		InviteCode:      a.InviteCode,
		InviteURL:       p.InviteURL,
		APIKeyRotatedAt: a.APIKeyRotatedAt,
		Stats: &model.AgentActivity{
			TxCount:           int(a.TxCount),
			VolumeSentUsd:     agentpay.USDCAmount(a.VolumeSent),
			VolumeReceivedUsd: agentpay.USDCAmount(a.VolumeReceived),
			FeesPaidUsd:       agentpay.USDCAmount(a.FeesPaid),
		},
		PrimaryWallet: p.Wallets.Primary,
		Wallets:       nonNilWallets(p.Wallets.All),
		Node:          a,
	}
}

func nonNilWallets(ws []*ent.Wallet) []*ent.Wallet {
	if ws == nil {
		return []*ent.Wallet{}
	}
	return ws
}

func trustModel(b agentpay.TrustBreakdown) *model.TrustBreakdown {
	return &model.TrustBreakdown{
		Score:          b.Score(),
		Partner:        b.Partner,
		ExternalWallet: b.ExternalWallet,
		Human:          b.Human,
		Age:            b.Age,
		Volume:         b.Volume,
	}
}

func registrationModel(r *agentpay.Registration) *model.Registration {
	primary := r.PrimaryWallet()
	out := &model.Registration{
		AgentID:       r.Agent.ID,
		Username:      r.Agent.Username,
		APIKey:        r.APIKey,
		WalletAddress: primary.Address,
		WalletChain:   primary.Chain,
		Wallets:       make([]*model.WalletAddress, 0, len(r.Wallets)),
		InviteURL:     r.InviteURL,
		InviteCode:    r.Agent.InviteCode,
		Message:       r.Message,
		Endpoints:     make([]*model.Endpoint, 0, len(r.Endpoints)),
	}
	for _, w := range r.Wallets {
		out.Wallets = append(out.Wallets, &model.WalletAddress{Address: w.Address, Chain: w.Chain})
	}
	for name, value := range r.Endpoints {
		out.Endpoints = append(out.Endpoints, &model.Endpoint{Name: name, Value: value})
	}
	sort.Slice(out.Endpoints, func(i, j int) bool { return out.Endpoints[i].Name < out.Endpoints[j].Name })
	return out
}

// leaderboardSort names the service's sort for the GraphQL enum.
func leaderboardSort(s *model.LeaderboardSort) string {
	if s == nil {
		return ""
	}
	switch *s {
	case model.LeaderboardSortTransactions:
		return agentpay.SortTransactions
	case model.LeaderboardSortTrustScore:
		return agentpay.SortTrustScore
	case model.LeaderboardSortVolume:
		return agentpay.SortVolume
	}
	return string(*s) // not a value of the enum: the service refuses it
}

func statsModel(s *agentpay.AgentStats) *model.Stats {
	out := &model.Stats{
		Agents:       int(s.Agents),
		ActiveAgents: int(s.ActiveAgents),
		AgentsByTier: make([]*model.TierCount, 0, len(s.AgentsByTier)),
		Transfers:    int(s.Transfers),
		VolumeUsd:    s.Volume,
		FeesUsd:      s.Fees,
		FeeRate:      s.FeeRate,
	}
	for _, t := range agentpay.Tiers {
		if n, ok := s.AgentsByTier[t]; ok {
			out.AgentsByTier = append(out.AgentsByTier, &model.TierCount{Tier: agent.Tier(t), Count: int(n)})
		}
	}
	return out
}

func treasuryModel(t *agentpay.TreasuryInfo) *model.TreasuryInfo {
	out := &model.TreasuryInfo{
		FeeRate:          t.FeeRate,
		FeesCollectedUsd: t.FeesCollected,
		FeeTransfers:     int(t.FeeTransfers),
		Wallets:          make([]*model.TreasuryWallet, 0, len(t.Wallets)),
	}
	for _, w := range t.Wallets {
		tw := &model.TreasuryWallet{Chain: string(w.Chain), Address: w.Address, Token: w.Token, Status: enumOf[model.TreasuryWalletStatus](w.Status), Gas: treasuryGasModel(w.Gas)}
		if w.Status == agentpay.TreasuryBalanceOK {
			b := w.Balance
			tw.Balance = &b
		}
		out.Wallets = append(out.Wallets, tw)
	}
	return out
}

func treasuryGasModel(g agentpay.GasReport) *model.TreasuryGas {
	out := &model.TreasuryGas{
		Token:            g.Native,
		Transactions:     int(g.Transactions),
		Fees:             g.Fees,
		Rent:             g.Rent,
		Total:            g.Fees.Add(g.Rent),
		ByPurpose:        make([]*model.GasByPurpose, 0, len(g.ByPurpose)),
		FeesCollectedUsd: g.SendFees,
	}
	for _, purpose := range slices.Sorted(maps.Keys(g.ByPurpose)) {
		out.ByPurpose = append(out.ByPurpose, &model.GasByPurpose{Purpose: purpose, Total: g.ByPurpose[purpose]})
	}
	return out
}

func limitsModel(l *agentpay.AgentLimits) *model.Limits {
	out := &model.Limits{
		Tier:              agent.Tier(l.Tier),
		TrustScore:        l.TrustScore,
		Trust:             trustModel(l.Trust),
		RequestsPerMinute: l.Limits.PerMinute,
		RequestsPerHour:   l.Limits.PerHour,
		PerSendUsd:        l.Limits.PerSend,
		DailyUsd:          l.Limits.Daily,
		SentTodayUsd:      l.SentToday,
		RemainingTodayUsd: l.RemainingToday,
		DayResetsAt:       l.DayResetsAt,
		Raise:             make([]*model.TrustAction, 0, len(l.Raise)),
		CanSend:           l.CanSend,
		CanReceive:        l.CanReceive,
		CardPurchases:     l.CardPurchases,
	}
	if l.NextTier != "" {
		next, score := agent.Tier(l.NextTier), l.NextTierScore
		out.NextTier, out.NextTierScore = &next, &score
	}
	for _, a := range l.Raise {
		out.Raise = append(out.Raise, &model.TrustAction{Action: a.Action, Points: a.Points, Earned: a.Earned, Done: a.Done, How: renderGraphQL(a.How)})
	}
	return out
}

func balanceModel(b *agentpay.Balance) *model.Balance {
	out := &model.Balance{
		Balances: make([]*model.ChainBalance, 0, len(b.Balances)),
		TotalUsd: b.TotalUSD,
	}
	if b.Agent != nil { // a human user's balance has none
		out.AgentID, out.Username = b.Agent.ID, b.Agent.Username
	}
	for _, c := range b.Balances {
		out.Balances = append(out.Balances, &model.ChainBalance{Chain: string(c.Chain), Token: c.Token, Balance: c.Balance, Address: c.Address})
	}
	return out
}

func sendRequest(in model.SendInput) agentpay.SendRequest {
	req := agentpay.SendRequest{ToUsername: in.ToUsername, AmountUSD: in.AmountUsd, IdempotencyKey: in.IdempotencyKey}
	if in.Memo != nil {
		req.Memo = *in.Memo
	}
	if in.Chain != nil {
		req.Chain = *in.Chain
	}
	return req
}

func sendPayload(res *agentpay.SendResult) *model.SendPayload {
	out := &model.SendPayload{
		TransactionID: res.Transfer.ID,
		FromAgent:     res.FromUsername,
		ToAgent:       res.ToUsername,
		AmountUsd:     res.Delivered,
		FeeUsd:        res.Fee,
		Chain:         string(res.Chain),
		Status:        transfer.Status(res.Status),
		Message:       res.Message,
		Transfer:      res.Transfer,
	}
	if res.TxHash != "" {
		h := res.TxHash
		out.TxHash = &h
	}
	return out
}

// checkoutPaymentPayload is an agent's checkout payment as payCheckout
// answers it.
func checkoutPaymentPayload(res *agentpay.CheckoutPayment) *model.CheckoutPaymentPayload {
	out := &model.CheckoutPaymentPayload{
		TransactionID: res.Transfer.ID,
		SessionID:     res.Session.ExternalID,
		SessionStatus: res.Session.Status,
		Status:        enumOf[model.CheckoutPaymentStatus](res.Status),
		AmountUsd:     res.AmountUSD,
		Chain:         string(res.Chain),
		FromAddress:   res.Transfer.FromAddress,
		ToAddress:     res.Transfer.ToAddress,
		Confirmations: res.Confirmations,
		Message:       res.Message,
	}
	if res.Payment != nil {
		id := res.Payment.ExternalID
		out.PaymentID = &id
	}
	if h := res.TxHash(); h != "" {
		out.TxHash = &h
	}
	if ref := res.InternalReference(); ref != "" {
		out.InternalReference = &ref
	}
	if res.Required > 0 {
		n := int(res.Required)
		out.RequiredConfirmations = &n
	}
	return out
}
