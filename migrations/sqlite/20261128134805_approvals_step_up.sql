-- Add column "deciders" to table: "card_requests"
ALTER TABLE `card_requests` ADD COLUMN `deciders` json NULL;
-- Add column "approved_by" to table: "card_requests"
ALTER TABLE `card_requests` ADD COLUMN `approved_by` json NULL;
-- Add column "deciders" to table: "spend_approvals"
ALTER TABLE `spend_approvals` ADD COLUMN `deciders` json NULL;
-- Add column "approved_by" to table: "spend_approvals"
ALTER TABLE `spend_approvals` ADD COLUMN `approved_by` json NULL;
-- Create "step_ups" table
CREATE TABLE `step_ups` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `user_id` uuid NOT NULL, `action` text NOT NULL, `subject` text NOT NULL DEFAULT (''), `method` text NOT NULL, `session_data` blob NULL, `token_hash` blob NULL, `summary` text NOT NULL DEFAULT (''), `expires_at` datetime NOT NULL, `confirmed_at` datetime NULL, `used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "step_ups_token_hash_key" to table: "step_ups"
CREATE UNIQUE INDEX `step_ups_token_hash_key` ON `step_ups` (`token_hash`);
-- Create index "stepup_user_id_created_at" to table: "step_ups"
CREATE INDEX `stepup_user_id_created_at` ON `step_ups` (`user_id`, `created_at`);
-- Create index "stepup_expires_at" to table: "step_ups"
CREATE INDEX `stepup_expires_at` ON `step_ups` (`expires_at`);
