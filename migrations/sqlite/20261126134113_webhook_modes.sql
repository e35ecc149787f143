-- Add column "webhook_secret_previous_encrypted" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `webhook_secret_previous_encrypted` blob NULL;
-- Add column "webhook_secret_previous_expires_at" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `webhook_secret_previous_expires_at` datetime NULL;
-- Add column "test_webhook_url" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_webhook_url` text NULL;
-- Add column "test_webhook_secret_encrypted" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_webhook_secret_encrypted` blob NULL;
-- Add column "test_webhook_secret_previous_encrypted" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_webhook_secret_previous_encrypted` blob NULL;
-- Add column "test_webhook_secret_previous_expires_at" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_webhook_secret_previous_expires_at` datetime NULL;
