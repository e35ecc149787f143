package graph

import (
	"time"

	"entgo.io/contrib/entgql"
	"github.com/google/uuid"

	"agentpay"
	"agentpay/ent"
	"agentpay/graph/model"
)

// The complexity of an operation (bounded by maxComplexity) estimates its
// work: a field costs 1 plus what it selects (gqlgen's default), a list
// costs what one element selects times how many elements it may hold, and a
// field that reaches past the row in hand costs more:
const (
	// readCost is a field that runs database queries of its own (a root
	// read, an edge resolved per object, an aggregate).
	readCost = 5
	// chainCost is a field that asks the chains (RPC round trips to every
	// configured chain).
	chainCost = 50
	// writeCost is a mutation: a transaction, its events and jobs.
	writeCost = 100
	// sendCost is a send: chain transactions, then a wait of up to 30 s for
	// their inclusion (agentpay.DefaultSendWait). At most three fit in one
	// operation, so an answer comes within the server's write timeout.
	sendCost = 3000
)

// Element counts assumed for the lists that have no page of their own;
// each is the most the list holds in practice, or by rule.
const (
	// walletsPerAgent: a custodial wallet per chain family and the external
	// wallets the agent verified.
	walletsPerAgent = 10
	// chainsPerMode: five chains in each of two modes.
	chainsPerMode = 10
	// depositAddressesPerSession: one per chain.
	depositAddressesPerSession = 5
	// eventsPerSession, paymentsPerAddress: a session's deposits and what
	// they caused.
	eventsPerSession   = 20
	paymentsPerAddress = 20
	// deliveriesPerEvent: the first delivery series and a few redeliveries.
	deliveriesPerEvent = 5
	// attemptsPerDelivery: the first try and the five retries of the
	// default schedule.
	attemptsPerDelivery = 6
	// refundsPerPayment: agentpay.MaxRefundsPerPayment, by rule.
	refundsPerPayment = agentpay.MaxRefundsPerPayment
	// keysPerMerchant: a key pair in each mode.
	keysPerMerchant = 4
	// small, fixed lists: tiers, trust actions, endpoints, accepted tokens.
	fixedList = 10
)

// pageCost is the cost of a page of up to n elements each costing child,
// plus the query that reads it.
func pageCost(n, child int) int {
	return readCost + max(n, 0)*child
}

// pageSize is how many elements a Relay page may hold: first or last as
// given (the service refuses more than MaxPageSize; the estimate does not
// need to), else unpaged.
func pageSize(first, last *int, unpaged int) int {
	n := -1
	if first != nil {
		n = *first
	}
	if last != nil {
		n = max(n, *last)
	}
	if n < 0 {
		return unpaged
	}
	return n
}

// listOf is the cost of an unpaged list assumed to hold n elements.
func listOf(n int) func(child int) int {
	return func(child int) int { return 1 + n*child }
}

// readListOf is the cost of an unpaged list read by a query of its own.
func readListOf(n int) func(child int) int {
	return func(child int) int { return pageCost(n, child) }
}

// reads is a field that runs its own queries.
func reads(child int) int { return readCost + child }

// complexity holds every field cost that is not gqlgen's default.
func complexity() ComplexityRoot {
	var c ComplexityRoot
	type cursor = *entgql.Cursor[uuid.UUID]

	// Pages: the service's paging rule (agentpay.PageArgs) gives
	// DefaultPageSize when neither first nor last is given.
	c.Query.Sessions = func(child int, _ cursor, first *int, _ cursor, last *int, _ *model.SessionFilter, _ *ent.CheckoutSessionOrder) int {
		return pageCost(pageSize(first, last, agentpay.DefaultPageSize), child)
	}
	c.Query.Payments = func(child int, _ cursor, first *int, _ cursor, last *int, _ *model.PaymentFilter, _ *ent.PaymentOrder) int {
		return pageCost(pageSize(first, last, agentpay.DefaultPageSize), child)
	}
	c.Query.WebhookEvents = func(child int, _ cursor, first *int, _ cursor, last *int, _ *model.WebhookEventFilter, _ *ent.WebhookEventOrder) int {
		return pageCost(pageSize(first, last, agentpay.DefaultPageSize), child)
	}
	c.Me.Transfers = func(child int, _ cursor, first *int, _ cursor, last *int, _ *ent.TransferOrder) int {
		return pageCost(pageSize(first, last, agentpay.DefaultPageSize), child)
	}
	c.Merchant.Sessions = func(child int, first *int, _ cursor) int {
		return pageCost(pageSize(first, nil, agentpay.DefaultPageSize), child)
	}
	c.Merchant.WebhookEvents = func(child int, first *int, _ cursor) int {
		return pageCost(pageSize(first, nil, agentpay.DefaultPageSize), child)
	}
	// The generated connection of a session's payments returns all of them
	// when neither first nor last is given: costed as a full page.
	c.CheckoutSession.Payments = func(child int, _ cursor, first *int, _ cursor, last *int, _ *ent.PaymentOrder) int {
		return pageCost(pageSize(first, last, agentpay.MaxPageSize), child)
	}
	c.Query.Leaderboard = func(child int, _ *model.LeaderboardSort, limit *int) int {
		n := agentpay.LeaderboardDefaultLimit
		if limit != nil && *limit != 0 {
			n = *limit
		}
		return pageCost(n, child)
	}
	c.Query.Nodes = func(child int, ids []uuid.UUID) int {
		// Each id is looked up on its own (several tables for a merchant).
		return len(ids) * (readCost + child)
	}

	// Lists without a page.
	c.Agent.Wallets = listOf(walletsPerAgent)
	c.Me.Wallets = listOf(walletsPerAgent)
	c.Balance.Balances = listOf(walletsPerAgent)
	c.ViewerBalance.Balances = listOf(walletsPerAgent)
	c.CheckoutSession.DepositAddresses = listOf(depositAddressesPerSession)
	c.CheckoutSession.WebhookEvents = listOf(eventsPerSession)
	// A session's attention reads its payments (and its merchant): a flag
	// for the sum and one per late payment at most.
	c.CheckoutSession.Attention = readListOf(paymentsPerAddress)
	c.DepositAddress.Payments = listOf(paymentsPerAddress)
	c.Payment.Refunds = readListOf(refundsPerPayment)
	c.Query.Refunds = func(child int, _ string) int { return pageCost(paymentsPerAddress*refundsPerPayment, child) }
	c.WebhookEvent.Deliveries = readListOf(deliveriesPerEvent)
	c.WebhookDelivery.AttemptLog = readListOf(attemptsPerDelivery)
	c.Merchant.Keys = readListOf(keysPerMerchant)
	c.Merchant.AcceptedTokens = listOf(fixedList)
	c.Limits.Raise = listOf(fixedList)
	c.Registration.Endpoints = listOf(fixedList)
	c.Registration.Wallets = listOf(walletsPerAgent)
	c.Stats.AgentsByTier = listOf(fixedList)
	c.TreasuryInfo.Wallets = listOf(chainsPerMode)
	c.TreasuryGas.ByPurpose = listOf(fixedList)
	c.Query.Chains = func(child int) int { return chainCost + chainsPerMode*child }

	// Reads of their own.
	c.Query.Me = reads
	c.Query.Merchant = reads
	c.Query.Agent = func(child int, _ uuid.UUID) int { return reads(child) }
	c.Query.AgentByUsername = func(child int, _ string) int { return reads(child) }
	c.Query.CheckUsername = func(child int, _ string) int { return reads(child) }
	c.Query.Session = func(child int, _ string) int { return reads(child) }
	c.Query.WebhookEvent = func(child int, _ uuid.UUID) int { return reads(child) }
	c.Query.Node = func(child int, _ uuid.UUID) int { return reads(child) }
	c.Query.Stats = reads
	c.Me.Limits = reads
	c.Transfer.FromAgent = reads
	c.Transfer.ToAgent = reads

	// The chains.
	c.Me.Balance = func(child int) int { return chainCost + child }
	c.Query.Treasury = func(child int) int { return chainCost + child }
	// The books (admin only) read the chains; a chain's lines are its four
	// holder classes. Their differences and records in flight come with
	// the read; counted as short lists, the whole answer stays well within
	// maxComplexity.
	c.Query.Books = func(child int) int { return chainCost + child }
	c.Books.Chains = listOf(chainsPerMode)
	c.BooksChain.Lines = listOf(len(agentpay.BooksHolderClasses))
	c.BooksLine.Differences = listOf(fixedList)
	c.BooksLine.InFlight = listOf(fixedList)

	// Writes.
	c.Mutation.Send = func(child int, _ model.SendInput) int { return sendCost + child }
	c.Mutation.QuickRegister = func(child int, _ string) int { return writeCost + child }
	c.Mutation.RegenerateAPIKey = func(child int) int { return writeCost + child }
	c.Mutation.VerifyPartner = func(child int, _, _ string) int { return writeCost + child }
	c.Mutation.CreateSession = func(child int, _ model.CreateSessionInput) int { return writeCost + child }
	c.Mutation.CancelSession = func(child int, _ string) int { return writeCost + child }
	c.Mutation.CreateRefund = func(child int, _ string, _ *model.RefundInput, _ *string) int { return writeCost + child }
	c.Mutation.UpdateMerchant = func(child int, _ model.UpdateMerchantInput) int { return writeCost + child }
	c.Mutation.RedeliverWebhook = func(child int, _ uuid.UUID) int { return writeCost + child }
	c.Mutation.RollWebhookSecret = func(child int, _ *int) int { return writeCost + child }
	c.Mutation.SetAcpWebhook = func(child int, _ string) int { return writeCost + child }
	c.Mutation.RollAcpWebhookSecret = func(child int) int { return writeCost + child }
	c.Mutation.SendToUser = func(child int, _ model.SendInput) int { return sendCost + child }
	c.Mutation.InviteHuman = func(child int, _ string) int { return writeCost + child }
	c.Mutation.RequestPairing = func(child int, _ uuid.UUID, _ *string) int { return writeCost + child }

	// The merchant dashboard (dashboard.graphql, merchantinsights.graphql).
	c.Viewer.Merchants = readListOf(fixedList)
	c.ManagedMerchant.Members = readListOf(agentpay.MaxMerchantMembers)
	c.Mutation.OpenDashboard = func(child int, _ uuid.UUID, _ model.Mode) int { return writeCost + child }
	c.Mutation.InviteMerchantMember = func(child int, _ uuid.UUID, _ string, _ model.MemberRole) int { return writeCost + child }
	c.Mutation.RemoveMerchantMember = func(child int, _, _ uuid.UUID) int { return writeCost + child }
	c.Mutation.SendTestWebhook = func(child int) int { return writeCost + child }
	c.Mutation.RollKeys = func(child int, _ *model.Mode) int { return writeCost + child }
	// A row per day and chain (statuses are mostly one): a year of five
	// fields fits the limit.
	c.Query.PaymentVolume = func(child int, from, to time.Time) int {
		days := int(to.Sub(from).Hours()/24) + 1
		return readCost + min(max(days, 1), agentpay.MaxPaymentVolumeDays)*chainsPerMode/2*child
	}

	// Humans: pairings and account events (agentpay.MaxPairingsListed,
	// agentpay.MaxAccountEventsPage).
	c.Me.Pairings = readListOf(agentpay.MaxPairingsListed)
	c.Viewer.Pairings = readListOf(agentpay.MaxPairingsListed)
	c.Viewer.Wallets = listOf(walletsPerAgent)
	c.Viewer.Events = func(child int, _ *int64, limit *int) int {
		return pageCost(pageSize(limit, nil, agentpay.MaxAccountEventsPage), child)
	}
	c.Query.Viewer = reads
	c.Viewer.Balance = func(child int) int { return chainCost + child }
	c.Mutation.DecidePairing = func(child int, _ uuid.UUID, _ model.PairingDecision) int { return writeCost + child }
	c.Mutation.StartIdentityVerification = func(child int) int { return writeCost + child }
	c.Mutation.AcceptInvitation = func(child int, _ string) int { return writeCost + child }
	c.Mutation.SignOut = func(child int, _ *bool) int { return writeCost + child }
	c.Mutation.Withdraw = func(child int, _ model.WithdrawInput) int { return sendCost + child }
	// An agent paying a checkout session is a send (chain transactions and
	// the wait for inclusion).
	c.Mutation.PayCheckout = func(child int, _ model.PayCheckoutInput) int { return sendCost + child }
	c.Viewer.Withdrawals = func(child int, limit *int) int {
		return pageCost(pageSize(limit, nil, agentpay.DefaultPageSize), child)
	}

	// Card purchases (agentpay.MaxCardRequestsListed); approving moves
	// money, as a send does.
	c.Viewer.CardRequests = readListOf(agentpay.MaxCardRequestsListed)
	c.Mutation.BeginCardApproval = func(child int, _ uuid.UUID) int { return writeCost + child }
	c.Mutation.ApproveCardRequest = func(child int, _ uuid.UUID, _ *uuid.UUID, _ *string) int { return sendCost + child }
	c.Mutation.DenyCardRequest = func(child int, _ uuid.UUID) int { return writeCost + child }

	// Spending policies (agentpay.MaxSpendApprovalsListed; a human has a
	// policy per paired agent, at most agentpay.MaxPairingsListed);
	// approving runs the held operation, a send.
	c.Viewer.SpendingPolicies = readListOf(agentpay.MaxPairingsListed)
	c.Viewer.SpendApprovals = readListOf(agentpay.MaxSpendApprovalsListed)
	c.SpendingPolicy.AllowedRecipients = listOf(agentpay.MaxAllowedRecipients)
	c.Mutation.SetSpendingPolicy = func(child int, _ model.SpendingPolicyInput) int { return writeCost + child }
	c.Mutation.ClearSpendingPolicy = func(child int, _ string) int { return writeCost + child }
	c.Mutation.BeginSpendApproval = func(child int, _ uuid.UUID) int { return writeCost + child }
	c.Mutation.ApproveSpendApproval = func(child int, _ uuid.UUID, _ *uuid.UUID, _ *string) int { return sendCost + child }
	c.Mutation.DenySpendApproval = func(child int, _ uuid.UUID) int { return writeCost + child }
	// Deciders are the humans whose policies held the operation: a few of
	// the agent's humans, whom a newcomer joins only with one's consent.
	c.SpendApproval.Deciders = listOf(fixedList)
	c.SpendApproval.ApprovedBy = listOf(fixedList)
	// The held checkout: its session and merchant read per approval.
	c.SpendApproval.Checkout = reads
	c.ViewerCardRequest.Deciders = listOf(fixedList)
	c.ViewerCardRequest.ApprovedBy = listOf(fixedList)

	// Pairing consents and the agent's revocation.
	c.Viewer.PairingConsents = readListOf(agentpay.MaxPairingsListed)
	c.Mutation.DecidePairingConsent = func(child int, _ uuid.UUID, _ model.PairingDecision) int { return writeCost + child }
	c.Mutation.RevokePairing = func(child int, _ uuid.UUID) int { return writeCost + child }

	// Settings: passkeys and sessions (agentpay.MaxPasskeysPerUser,
	// agentpay.MaxBrowserSessionsListed).
	c.Viewer.Passkeys = readListOf(agentpay.MaxPasskeysPerUser)
	c.Viewer.Sessions = readListOf(agentpay.MaxBrowserSessionsListed)
	c.Passkey.Transports = listOf(fixedList)
	c.Mutation.UpdateViewer = func(child int, _ string) int { return writeCost + child }
	c.Mutation.BeginPasskeyRegistration = func(child int, _ *uuid.UUID, _ *string) int { return writeCost + child }
	c.Mutation.FinishPasskeyRegistration = func(child int, _ uuid.UUID, _, _ string) int { return writeCost + child }
	c.Mutation.DeletePasskey = func(child int, _ uuid.UUID, _ *uuid.UUID, _ *string) int { return writeCost + child }

	// Step-ups (stepups.go): beginning one may mail a link.
	c.Mutation.BeginStepUp = func(child int, _ model.StepUpInput) int { return writeCost + child }
	c.Viewer.StepUp = func(child int, _ uuid.UUID) int { return readCost + child }
	c.Mutation.RevokeSession = func(child int, _ uuid.UUID) int { return writeCost + child }
	c.Me.Events = func(child int, _ *int64, limit *int) int {
		return pageCost(pageSize(limit, nil, agentpay.MaxAccountEventsPage), child)
	}
	return c
}
