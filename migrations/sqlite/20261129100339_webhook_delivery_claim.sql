-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_webhook_deliveries" table
CREATE TABLE `new_webhook_deliveries` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `url` text NOT NULL, `status` text NOT NULL DEFAULT ('pending'), `attempts` integer NOT NULL DEFAULT (0), `next_attempt_at` datetime NULL, `last_attempt_at` datetime NULL, `completed_at` datetime NULL, `merchant_id` uuid NULL, `livemode` bool NULL, `job_id` integer NULL, `event_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `webhook_deliveries_webhook_events_deliveries` FOREIGN KEY (`event_id`) REFERENCES `webhook_events` (`id`) ON DELETE NO ACTION);
-- Copy rows from old table "webhook_deliveries" to new temporary table "new_webhook_deliveries"
INSERT INTO `new_webhook_deliveries` (`id`, `created_at`, `updated_at`, `url`, `status`, `attempts`, `next_attempt_at`, `last_attempt_at`, `completed_at`, `event_id`) SELECT `id`, `created_at`, `updated_at`, `url`, `status`, `attempts`, `next_attempt_at`, `last_attempt_at`, `completed_at`, `event_id` FROM `webhook_deliveries`;
-- Drop "webhook_deliveries" table after copying rows
DROP TABLE `webhook_deliveries`;
-- Rename temporary table "new_webhook_deliveries" to "webhook_deliveries"
ALTER TABLE `new_webhook_deliveries` RENAME TO `webhook_deliveries`;
-- Backfill: each delivery's merchant and mode are its event's (the batch's claim reads them)
UPDATE `webhook_deliveries` SET `merchant_id` = (SELECT `merchant_id` FROM `webhook_events` e WHERE e.`id` = `webhook_deliveries`.`event_id`), `livemode` = (SELECT `livemode` FROM `webhook_events` e WHERE e.`id` = `webhook_deliveries`.`event_id`);
-- Create index "webhookdelivery_event_id" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_event_id` ON `webhook_deliveries` (`event_id`);
-- Create index "webhookdelivery_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_status_next_attempt_at` ON `webhook_deliveries` (`status`, `next_attempt_at`);
-- Create index "webhookdelivery_merchant_id_livemode_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_merchant_id_livemode_status_next_attempt_at` ON `webhook_deliveries` (`merchant_id`, `livemode`, `status`, `next_attempt_at`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
