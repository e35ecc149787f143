-- Create index "acporderevent_completed_at" to table: "acp_order_events"
CREATE INDEX "acporderevent_completed_at" ON "acp_order_events" ("completed_at");
-- Create index "merchantfeedentry_event_id" to table: "merchant_feed_entries"
CREATE INDEX "merchantfeedentry_event_id" ON "merchant_feed_entries" ("event_id");
-- Create index "webhookevent_created_at" to table: "webhook_events"
CREATE INDEX "webhookevent_created_at" ON "webhook_events" ("created_at");
