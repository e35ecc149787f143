-- Create "spend_approvals" table
CREATE TABLE `spend_approvals` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `agent_id` uuid NOT NULL, `operation` text NOT NULL, `request` text NOT NULL, `amount` integer NOT NULL, `recipient` text NOT NULL, `reason` text NOT NULL, `status` text NOT NULL DEFAULT ('awaiting_approval'), `expires_at` datetime NOT NULL, `decided_at` datetime NULL, `decided_by` uuid NULL, `transfer_id` uuid NULL, `error` text NULL, `idempotency_key` text NULL, `fingerprint` blob NULL, PRIMARY KEY (`id`));
-- Create index "spendapproval_agent_id_created_at" to table: "spend_approvals"
CREATE INDEX `spendapproval_agent_id_created_at` ON `spend_approvals` (`agent_id`, `created_at`);
-- Create index "spendapproval_status_expires_at" to table: "spend_approvals"
CREATE INDEX `spendapproval_status_expires_at` ON `spend_approvals` (`status`, `expires_at`);
-- Create index "spendapproval_agent_id_operation_idempotency_key" to table: "spend_approvals"
CREATE UNIQUE INDEX `spendapproval_agent_id_operation_idempotency_key` ON `spend_approvals` (`agent_id`, `operation`, `idempotency_key`);
-- Create "spending_policies" table
CREATE TABLE `spending_policies` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `agent_id` uuid NOT NULL, `user_id` uuid NOT NULL, `approval_threshold` integer NULL, `per_payment_cap` integer NULL, `daily_cap` integer NULL, `allowed_recipients` json NULL, `deny_by_default` bool NOT NULL DEFAULT (false), PRIMARY KEY (`id`));
-- Create index "spendingpolicy_agent_id_user_id" to table: "spending_policies"
CREATE UNIQUE INDEX `spendingpolicy_agent_id_user_id` ON `spending_policies` (`agent_id`, `user_id`);
