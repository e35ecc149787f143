-- Modify "webhook_deliveries" table
ALTER TABLE "webhook_deliveries" ADD COLUMN "merchant_id" uuid NULL, ADD COLUMN "livemode" boolean NULL, ADD COLUMN "job_id" bigint NULL;
-- Backfill: each delivery's merchant and mode are its event's (the batch's claim reads them)
UPDATE "webhook_deliveries" d SET "merchant_id" = e."merchant_id", "livemode" = e."livemode" FROM "webhook_events" e WHERE e."id" = d."event_id";
-- Create index "webhookdelivery_merchant_id_livemode_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX "webhookdelivery_merchant_id_livemode_status_next_attempt_at" ON "webhook_deliveries" ("merchant_id", "livemode", "status", "next_attempt_at");
