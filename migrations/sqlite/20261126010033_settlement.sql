-- Add column "settlement_fiat_amount" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `settlement_fiat_amount` text NULL;
-- Add column "settlement_fiat_currency" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `settlement_fiat_currency` text NULL;
-- Add column "settlement_chain" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `settlement_chain` text NULL;
-- Add column "settlement_address" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `settlement_address` text NULL;
-- Add column "settlement_error" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `settlement_error` text NULL;
