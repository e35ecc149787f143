-- Create "dashboard_sessions" table
CREATE TABLE `dashboard_sessions` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `merchant_id` uuid NOT NULL, `user_id` uuid NOT NULL, `browser_session_id` uuid NOT NULL, `mode` text NOT NULL, `token_hash` blob NOT NULL, `expires_at` datetime NOT NULL, `revoked_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "dashboard_sessions_token_hash_key" to table: "dashboard_sessions"
CREATE UNIQUE INDEX `dashboard_sessions_token_hash_key` ON `dashboard_sessions` (`token_hash`);
-- Create index "dashboardsession_browser_session_id" to table: "dashboard_sessions"
CREATE INDEX `dashboardsession_browser_session_id` ON `dashboard_sessions` (`browser_session_id`);
-- Create index "dashboardsession_user_id_merchant_id" to table: "dashboard_sessions"
CREATE INDEX `dashboardsession_user_id_merchant_id` ON `dashboard_sessions` (`user_id`, `merchant_id`);
-- Create "merchant_members" table
CREATE TABLE `merchant_members` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `merchant_id` uuid NOT NULL, `user_id` uuid NULL, `email` text NOT NULL, `role` text NOT NULL, `invited_by` uuid NULL, `accepted_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "merchantmember_merchant_id_email" to table: "merchant_members"
CREATE UNIQUE INDEX `merchantmember_merchant_id_email` ON `merchant_members` (`merchant_id`, `email`);
-- Create index "merchantmember_user_id" to table: "merchant_members"
CREATE INDEX `merchantmember_user_id` ON `merchant_members` (`user_id`);
-- Create index "merchantmember_email" to table: "merchant_members"
CREATE INDEX `merchantmember_email` ON `merchant_members` (`email`);
