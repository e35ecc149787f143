-- Add column "kind" to table: "transfers"
ALTER TABLE `transfers` ADD COLUMN `kind` text NULL;
-- Backfill (transfer_kinds.go, transferKindBackfill): each transfer's kind from the columns the code read it from
-- until now; an agent's transfer to no party and no session is its card reservation, paid to the treasury.
UPDATE transfers SET kind = CASE WHEN checkout_session_id IS NOT NULL THEN 'checkout_payment' WHEN from_user_id IS NOT NULL THEN 'withdrawal' WHEN to_agent_id IS NOT NULL THEN 'send' WHEN to_user_id IS NOT NULL THEN 'send_to_user' ELSE 'card_reservation' END;
