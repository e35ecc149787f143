-- Add column "sweep_submitted_at" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `sweep_submitted_at` datetime NULL;
-- Add column "swept_at" to table: "payments"
ALTER TABLE `payments` ADD COLUMN `swept_at` datetime NULL;
