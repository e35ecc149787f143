-- Add column "acp_webhook_url" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `acp_webhook_url` text NULL;
-- Add column "acp_webhook_secret_encrypted" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `acp_webhook_secret_encrypted` blob NULL;
-- Add column "test_acp_webhook_url" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_acp_webhook_url` text NULL;
-- Add column "test_acp_webhook_secret_encrypted" to table: "merchants"
ALTER TABLE `merchants` ADD COLUMN `test_acp_webhook_secret_encrypted` blob NULL;
-- Create "acp_order_events" table
CREATE TABLE `acp_order_events` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `merchant_id` uuid NOT NULL, `session_id` uuid NOT NULL, `livemode` bool NOT NULL, `seq` integer NOT NULL, `event_type` text NOT NULL, `payload` blob NOT NULL, `status` text NOT NULL DEFAULT ('pending'), `attempts` integer NOT NULL DEFAULT (0), `next_attempt_at` datetime NULL, `last_status_code` integer NULL, `last_error` text NULL, `completed_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "acporderevent_session_id_seq" to table: "acp_order_events"
CREATE UNIQUE INDEX `acporderevent_session_id_seq` ON `acp_order_events` (`session_id`, `seq`);
-- Create index "acporderevent_merchant_id_livemode_created_at" to table: "acp_order_events"
CREATE INDEX `acporderevent_merchant_id_livemode_created_at` ON `acp_order_events` (`merchant_id`, `livemode`, `created_at`);
