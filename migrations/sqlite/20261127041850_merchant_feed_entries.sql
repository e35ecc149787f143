-- Create "merchant_feed_entries" table
CREATE TABLE `merchant_feed_entries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `merchant_id` uuid NOT NULL, `livemode` bool NOT NULL, `event_id` uuid NOT NULL, `kind` text NOT NULL, `data` text NOT NULL, `created_at` datetime NOT NULL);
-- Create index "merchantfeedentry_merchant_id_livemode_id" to table: "merchant_feed_entries"
CREATE INDEX `merchantfeedentry_merchant_id_livemode_id` ON `merchant_feed_entries` (`merchant_id`, `livemode`, `id`);
