-- Add column "reminded_at" to table: "card_requests"
ALTER TABLE `card_requests` ADD COLUMN `reminded_at` datetime NULL;
-- Add column "reminded_at" to table: "spend_approvals"
ALTER TABLE `spend_approvals` ADD COLUMN `reminded_at` datetime NULL;
